package testenv

import (
	"os"
	"testing"
)

// CIEnv is the variable .ci/run exports: there every external service a
// test needs (chromium now, PostgreSQL later) is installed, so a missing one
// is a failure, not a skip.
const CIEnv = "HOOKLEDGER_CI"

// NeedService ends a test that cannot reach the external service name (err
// says why): in CI (HOOKLEDGER_CI set) the test fails, since CI installs
// every service and a skip there would hide a broken install; elsewhere it
// is skipped with the reason, so `go test ./...` passes on a machine
// without the service. A nil err does nothing.
func NeedService(t testing.TB, name string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv(CIEnv) != "" {
		t.Fatalf("%s is required in CI (%s is set) but unavailable: %v", name, CIEnv, err)
		return
	}
	t.Skipf("skipping: %s is unavailable (%v); install it to run this test (CI, with %s=1, fails instead of skipping)", name, err, CIEnv)
}
