package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// verify --save stores the anchors a clean verify covered (and lists them);
// verify --since reads them back, checks what came after, and rolls the
// file forward; a plain verify's table is what it always was.
func TestVerifySaveAndSince(t *testing.T) {
	e := newCLIEnv(t)
	seedAwkward(e) // 20 receipts, 20 ledger rows
	if out := e.mustRun("verify"); strings.Contains(out, "verified head") {
		t.Errorf("a plain verify lists the anchors:\n%s", out)
	}
	var rep struct {
		Anchors []string `json:"verified_anchors"`
	}
	if err := json.Unmarshal([]byte(e.mustRun("verify", "--format", "json")), &rep); err != nil || len(rep.Anchors) != 4 ||
		!strings.HasPrefix(rep.Anchors[0], "ledger:20:") {
		t.Fatalf("verify --format json: verified_anchors %v, %v", rep.Anchors, err)
	}

	file := filepath.Join(e.dir, "verified-anchors")
	out := e.mustRun("verify", "--save", file)
	if !strings.Contains(out, "verified head") || !strings.Contains(out, rep.Anchors[0]) {
		t.Errorf("verify --save does not list the anchors:\n%s", out)
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("saved anchors: %v, %v; want mode 0600", fi, err)
	}
	saved, _ := os.ReadFile(file)
	for _, a := range rep.Anchors {
		if !strings.Contains(string(saved), a+"\n") {
			t.Errorf("saved anchors lack %s:\n%s", a, saved)
		}
	}

	e.write(t0("2026-11-03T00:00:00Z"), usageEvent{customer: "late", meter: "api", qty: "3", at: t0("2026-11-02T00:00:00Z")})
	out = e.mustRun("verify", "--since", file, "--save", file)
	for _, want := range []string{"hash chain (incremental: ledger rows from 20)  2", "integrity_check", "skipped", "receipts:21:", "ledger:21:"} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(want), " ")) && !strings.Contains(out, want) {
			t.Errorf("verify --since: want %q in\n%s", want, out)
		}
	}
	if saved, _ = os.ReadFile(file); !strings.Contains(string(saved), "ledger:21:") {
		t.Errorf("--since --save did not roll the anchors forward:\n%s", saved)
	}

	// An edit after the saved anchors: exit 3 naming the row, and the
	// file keeps the anchors that still hold.
	e.write(t0("2026-11-04T00:00:00Z"), usageEvent{customer: "late", meter: "api", qty: "4", at: t0("2026-11-02T00:00:00Z")})
	e.tamper(`DROP TRIGGER metered_usage_no_update`, `UPDATE metered_usage SET quantity = 1 WHERE id = 22`)
	out, err = e.run("verify", "--since", file, "--save", file)
	if exitStatus(err) != exitProblem || !strings.Contains(err.Error(), "metered_usage row 22") {
		t.Errorf("an edited new row: exit %d, %v\n%s", exitStatus(err), err, out)
	}
	if after, _ := os.ReadFile(file); string(after) != string(saved) {
		t.Errorf("a failed verify rewrote the anchors:\n%s", after)
	}
}

// What --since cannot start from is a wrong command line (exit 2).
func TestVerifySinceBadInput(t *testing.T) {
	e := newCLIEnv(t)
	seedAwkward(e)
	empty := filepath.Join(e.dir, "empty.txt")
	os.WriteFile(empty, []byte("nothing here\n"), 0o600)
	head := e.mustRun("ledger", "head")
	twice := filepath.Join(e.dir, "twice.txt")
	os.WriteFile(twice, []byte(head+strings.Replace(head, "ledger:20:", "ledger:19:", 1)), 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"verify", "--since", filepath.Join(e.dir, "no-such-file")}, "no such file"},
		{[]string{"verify", "--since", empty}, "no anchors"},
		{[]string{"verify", "--since", "ledger:20:abcd"}, "hash is not 64 hex digits"},
		{[]string{"verify", "--since", twice}, "two ledger anchors"},
	} {
		out, err := e.run(tc.args...)
		if exitStatus(err) != exitUsage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: exit %d, %v; want exit 2 and %q\n%s", tc.args, exitStatus(err), err, tc.want, out)
		}
	}
}
