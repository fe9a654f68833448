package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/schema"
)

// recEnv is a data directory with a config for one provider reconciled from a
// JSONL export, and a second without reconcile settings.
type recEnv struct {
	t   *testing.T
	dir string
	cfg string
}

const recConfig = `data: %s
providers:
  - name: acme
    scheme: standard
    secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]
    replay_horizon: 3d
    reconcile:
      source: file
      file: export.jsonl
      time_path: data.occurred_at
  - name: plain
    scheme: github
    secrets: ["s"]
retention:
  payload: 30d
  keys: 35d
usage:
  - provider: acme
    type: usage.recorded
    customer: data.customer
    meter: data.meter
    quantity: %s
    occurred_at: data.occurred_at
`

func newRecEnv(t *testing.T) *recEnv {
	e := &recEnv{t: t, dir: t.TempDir()}
	e.cfg = filepath.Join(e.dir, "hookledger.yml")
	e.config("data.qty") // the deployed mapping has a bug
	at := time.Now().UTC().Add(-time.Hour).Format(time.RFC3339)
	var lines []string
	for i := 1; i <= 3; i++ {
		lines = append(lines, fmt.Sprintf(`{"id":"evt_%d","type":"usage.recorded","data":{"customer":"cus_1","meter":"api","quantity":%d,"occurred_at":%q}}`, i, i, at))
	}
	if err := os.WriteFile(filepath.Join(e.dir, "export.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *recEnv) config(quantityPath string) {
	if err := os.WriteFile(e.cfg, fmt.Appendf(nil, recConfig, filepath.Join(e.dir, "data"), quantityPath), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// run runs the CLI in-process: hookledger CMD... --config CFG ARGS.
func (e *recEnv) run(cmd []string, args ...string) (string, error) {
	var out, errOut bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &out, &errOut
	argv := append(append(append([]string{"hookledger"}, cmd...), "--config", e.cfg), args...)
	err := app.Run(argv)
	return out.String(), err
}

func (e *recEnv) json(v any, cmd []string, args ...string) {
	e.t.Helper()
	out, err := e.run(cmd, append(args, "--format", "json")...)
	if err != nil {
		e.t.Fatalf("%v %v: %v\n%s", cmd, args, err, out)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		e.t.Fatalf("%v: not JSON: %v\n%s", cmd, err, out)
	}
}

func TestReconcileReplayPruneAuditCLI(t *testing.T) {
	e := newRecEnv(t)
	if out, err := e.run([]string{"migrate"}); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	rec := []string{"reconcile"}

	var m map[string]any
	e.json(&m, rec, "--provider", "acme")
	if m["seen"] != 3.0 || m["inserted"] != 3.0 || m["mapping_failed"] != 3.0 || m["complete"] != true {
		t.Fatalf("first reconcile %v", m)
	}
	e.json(&m, rec, "--provider", "acme", "--since", "3d")
	if m["already_present"] != 3.0 || m["inserted"] != 0.0 {
		t.Fatalf("second reconcile %v", m)
	}
	out, err := e.run(rec, "--provider", "acme", "--since", "3d", "--dry-run")
	if err != nil || !strings.Contains(out, "SEEN") || !strings.Contains(out, "dry run: nothing was written") {
		t.Errorf("table dry run: %v\n%s", err, out)
	}

	// The mapping is fixed; replay turns failed into applied, once.
	e.config("data.quantity")
	e.json(&m, []string{"replay"}, "--provider", "acme", "--status", "failed", "--since", "1d")
	if m["selected"] != 3.0 || m["applied"] != 3.0 {
		t.Fatalf("replay %v", m)
	}
	e.json(&m, []string{"replay"}, "--provider", "acme", "--event", "evt_2")
	if m["already_applied"] != 1.0 || m["applied"] != 0.0 {
		t.Fatalf("replay of an applied event %v", m)
	}
	var usage []struct {
		Customer string `json:"customer"`
		Quantity string `json:"quantity"`
		Events   int    `json:"events"`
	}
	e.json(&usage, []string{"usage"})
	if len(usage) != 1 || usage[0].Quantity != "6" || usage[0].Events != 3 {
		t.Errorf("usage after replay %+v, want 1+2+3 = 6 over 3 events", usage)
	}

	e.json(&m, []string{"prune"}, "--dry-run")
	if m["bodies_pruned"] != 0.0 || m["dry_run"] != true || m["payload_before"] == nil {
		t.Errorf("prune dry run %v", m)
	}
	e.json(&m, []string{"prune"})
	if m["bodies_pruned"] != 0.0 || m["keys_deleted"] != 0.0 {
		t.Errorf("prune %v", m)
	}
	var ms []any
	e.json(&ms, []string{"audit", "mismatches"})
	if ms == nil || len(ms) != 0 {
		t.Errorf("mismatches %v", ms)
	}
}

func TestReconcileCLIErrors(t *testing.T) {
	e := newRecEnv(t)
	// No database yet: reconcile, replay and prune refuse to create one, dry run or not.
	db := filepath.Join(e.dir, "data", "hookledger.db")
	for _, cmd := range [][]string{
		{"reconcile", "--provider", "acme", "--dry-run"}, {"reconcile", "--provider", "acme"},
		{"replay", "--provider", "acme", "--status", "failed"}, {"prune"}, {"prune", "--dry-run"},
	} {
		if _, err := e.run(cmd[:1], cmd[1:]...); err == nil || !strings.Contains(err.Error(), "no database at "+db+": run `hookledger serve` or `hookledger migrate`") {
			t.Errorf("%v without a database: %v", cmd, err)
		}
		if _, err := os.Stat(filepath.Join(e.dir, "data")); !os.IsNotExist(err) {
			t.Fatalf("%v created the data directory (stat: %v)", cmd, err)
		}
	}
	if out, err := e.run([]string{"migrate"}); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		cmd  []string
		args []string
		want string
	}{
		{[]string{"reconcile"}, nil, `--provider is required`},
		{[]string{"reconcile"}, []string{"--provider", "nope"}, `--provider: no provider named "nope" (configured: acme, plain)`},
		{[]string{"reconcile"}, []string{"--provider", "plain"}, `provider "plain" has no reconcile settings`},
		{[]string{"reconcile"}, []string{"--provider", "acme", "--since", "soon"}, `--since: invalid duration "soon"`},
		{[]string{"reconcile"}, []string{"--provider", "acme", "--since", "-1h"}, `--since: must be positive`},
		{[]string{"reconcile"}, []string{"--provider", "acme", "--since", "40d"}, "reaches further back than retention.keys"},
		{[]string{"reconcile"}, []string{"--provider", "acme", "--format", "xml"}, `--format: "xml" is not one of`},
		{[]string{"reconcile"}, []string{"--provider", "acme", "--file", "/nonexistent.jsonl"}, "no such file"},
		{[]string{"replay"}, []string{"--provider", "acme"}, "give either --event ID or --status failed|ignored"},
		{[]string{"replay"}, []string{"--provider", "acme", "--event", "e", "--status", "failed"}, "give either"},
		{[]string{"replay"}, []string{"--provider", "acme", "--status", "applied"}, "applied receipts are never replayed"},
		{[]string{"replay"}, []string{"--provider", "acme", "--event", "e", "--since", "1d"}, "does not go with --event"},
		{[]string{"replay"}, []string{"--provider", "acme", "--status", "failed", "--since", "x"}, "--since: want a positive duration"},
		{[]string{"replay"}, []string{"--provider", "nope", "--status", "failed"}, `no provider named "nope"`},
		{[]string{"replay"}, []string{"--provider", "acme", "--event", "evt_nope"}, "no receipt for acme/evt_nope"},
		{[]string{"audit", "mismatches"}, []string{"--since", "later"}, "--since: want a positive duration"},
	} {
		out, err := e.run(tc.cmd, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: err %v, want %q\n%s", tc.cmd, tc.args, err, tc.want, out)
		}
	}
	// A config whose keys window is shorter than a provider's horizon stops every command.
	bad := strings.Replace(recConfig, "payload: 30d\n  keys: 35d", "payload: 1d\n  keys: 1d", 1)
	os.WriteFile(e.cfg, fmt.Appendf(nil, bad, filepath.Join(e.dir, "data"), "data.quantity"), 0o600)
	_, err := e.run([]string{"prune"})
	if err == nil || !strings.Contains(err.Error(), `retention.keys: 1d is shorter than provider "acme"'s replay horizon (3d)`) {
		t.Errorf("short keys: %v", err)
	}
}

func TestPruneWithoutRetentionSaysSo(t *testing.T) {
	e := newRecEnv(t)
	cfg := strings.Replace(recConfig, "retention:\n  payload: 30d\n  keys: 35d\n", "", 1)
	os.WriteFile(e.cfg, fmt.Appendf(nil, cfg, filepath.Join(e.dir, "data"), "data.quantity"), 0o600)
	out, err := e.run([]string{"prune"})
	if err != nil || !strings.Contains(out, "retention is not configured") {
		t.Errorf("err %v\n%s", err, out)
	}
}

// prune keeps a receipt whose body was changed, says how many it kept and
// exits with status 3; the others are pruned.
func TestPruneKeepsATamperedBodyAndExits3(t *testing.T) {
	e := newRecEnv(t)
	cfg := strings.Replace(recConfig, "payload: 30d", "payload: 1s", 1)
	os.WriteFile(e.cfg, fmt.Appendf(nil, cfg, filepath.Join(e.dir, "data"), "data.quantity"), 0o600)
	if out, err := e.run([]string{"migrate"}); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	if out, err := e.run([]string{"reconcile"}, "--provider", "acme", "--since", "3d"); err != nil {
		t.Fatalf("reconcile: %v\n%s", err, out)
	}
	db, err := schema.Open(context.Background(), filepath.Join(e.dir, "data", schema.FileName), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Write.Exec(`UPDATE receipts SET body = ? WHERE event_id = 'evt_2'`, []byte(`{"id":"evt_2","edited":true}`)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	time.Sleep(1100 * time.Millisecond) // past retention.payload

	out, err := e.run([]string{"prune"}, "--format", "json")
	var exit *exitError
	if !errors.As(err, &exit) || exit.code != exitProblem || !strings.Contains(err.Error(), "kept 1 receipts whole although due") {
		t.Fatalf("prune: %v, want exit status 3 for the kept receipt\n%s", err, out)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil || m["bodies_pruned"] != 2.0 || m["tampered_kept"] != 1.0 {
		t.Errorf("prune report %v (%v), want 2 bodies pruned and 1 kept", m, err)
	}
	db, err = schema.Open(context.Background(), filepath.Join(e.dir, "data", schema.FileName), schema.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var whole []string
	if err := db.Read.Select(&whole, `SELECT event_id FROM receipts WHERE body IS NOT NULL ORDER BY event_id`); err != nil || len(whole) != 1 || whole[0] != "evt_2" {
		t.Errorf("receipts with a body after prune: %v (%v), want only the tampered evt_2", whole, err)
	}
}
