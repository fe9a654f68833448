package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/hookledger/hookledger/schema"
)

func (e *cliEnv) tamper(stmts ...string) {
	e.t.Helper()
	db, err := sqlx.Open("sqlite", "file:"+filepath.Join(e.dir, "data", schema.FileName))
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			e.t.Fatalf("%s: %v", s, err)
		}
	}
}

func TestLedgerHeadAnchorsVerify(t *testing.T) {
	e := newCLIEnv(t)
	seedAwkward(e) // 20 receipts, 20 ledger rows
	var head map[string]struct {
		ID     int64  `json:"id"`
		Hash   string `json:"hash"`
		Anchor string `json:"anchor"`
	}
	if err := json.Unmarshal([]byte(e.mustRun("ledger", "head", "--format", "json")), &head); err != nil {
		t.Fatal(err)
	}
	l, r := head["ledger"], head["receipts"]
	if l.ID != 20 || r.ID != 20 || len(l.Hash) != 64 || l.Anchor != "ledger:20:"+l.Hash || r.Anchor != "receipts:20:"+r.Hash {
		t.Fatalf("ledger head: %+v", head)
	}
	table := e.mustRun("ledger", "head")
	anchors := filepath.Join(e.dir, "anchors.txt")
	if err := os.WriteFile(anchors, []byte(table), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := e.mustRun("verify", "--anchor", l.Anchor, "--anchor", r.Anchor); strings.Contains(out, "BROKEN") || !strings.Contains(out, "anchors") {
		t.Fatalf("verify with anchors:\n%s", out)
	}
	e.mustRun("verify", "--anchors", anchors)

	// Delete the newest usage rows with their receipts and attempts, and
	// point the head at what is left: only the anchors show it.
	e.tamper(
		`DROP TRIGGER metered_usage_no_delete`, `DROP TRIGGER chain_head_forward_only`,
		`DELETE FROM metered_usage WHERE id > 18`,
		`DELETE FROM delivery_attempts WHERE event_id NOT IN (SELECT event_id FROM metered_usage)`,
		`DELETE FROM receipts WHERE event_id NOT IN (SELECT event_id FROM metered_usage)`,
		`UPDATE chain_head SET ledger_id = 18, ledger_hash = (SELECT row_hash FROM metered_usage WHERE id = 18),
			receipt_id = 18, receipt_hash = (SELECT row_hash FROM receipts WHERE id = 18)`,
	)
	e.mustRun("verify")
	for _, args := range [][]string{{"--anchor", l.Anchor}, {"--anchors", anchors}} {
		out, err := e.run(append([]string{"verify"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "anchor "+l.Anchor+": row 20 is missing") {
			t.Errorf("verify %v after truncation: %v\n%s", args, err, out)
		}
		if args[0] == "--anchors" && !strings.Contains(out, "anchor "+r.Anchor+": row 20 is missing") {
			t.Errorf("verify %v does not name the receipts anchor:\n%s", args, out)
		}
	}
}

func TestLedgerHeadAndAnchorErrors(t *testing.T) {
	e := newCLIEnv(t)
	missing := filepath.Join(e.dir, "nowhere")
	if _, err := e.run("ledger", "head", "--data", missing); err == nil {
		t.Fatal("ledger head on a missing data directory succeeded")
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("ledger head created %s: %v", missing, err)
	}
	empty := filepath.Join(e.dir, "empty.txt")
	os.WriteFile(empty, []byte("nothing here\n"), 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"verify", "--anchor", "25:abcd"}, "--anchor: anchor \"25:abcd\""},
		{[]string{"verify", "--anchor", "ledger:25:abcd"}, "hash is not 64 hex digits"},
		{[]string{"verify", "--anchors", filepath.Join(e.dir, "no-such-file")}, "--anchors:"},
		{[]string{"verify", "--anchors", empty}, "no anchors"},
	} {
		if out, err := e.run(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q\n%s", tc.args, err, tc.want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(e.dir, "data")); !os.IsNotExist(err) {
		t.Fatalf("a refused verify created the data directory: %v", err)
	}
}
