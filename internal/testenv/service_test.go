package testenv

import (
	"errors"
	"testing"
)

// fakeT records how NeedService ended a test.
type fakeT struct {
	testing.TB
	failed, skipped bool
	msg             string
}

func (f *fakeT) Helper()                   {}
func (f *fakeT) Fatalf(s string, a ...any) { f.failed = true; f.msg = s }
func (f *fakeT) Skipf(s string, a ...any)  { f.skipped = true; f.msg = s }

func TestNeedService(t *testing.T) {
	down := errors.New("exec: chromium: not found")
	for _, c := range []struct {
		name, ci      string
		err           error
		fail, skipped bool
	}{
		{"available", "1", nil, false, false},
		{"available outside CI", "", nil, false, false},
		{"missing in CI fails", "1", down, true, false},
		{"missing elsewhere skips", "", down, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(CIEnv, c.ci)
			f := &fakeT{TB: t}
			NeedService(f, "chromium", c.err)
			if f.failed != c.fail || f.skipped != c.skipped {
				t.Errorf("failed %v skipped %v, want %v %v (%s)", f.failed, f.skipped, c.fail, c.skipped, f.msg)
			}
		})
	}
}
