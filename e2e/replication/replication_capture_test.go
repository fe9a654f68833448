package replication_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/litestream"

	"github.com/hookledger/hookledger/e2e/internal/e2e"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/replication"
)

// When Litestream cannot write its LTX files, as on a full data disk (here:
// a directory where its next file would be staged, which fails the same
// step and works for root), replication is reported failing on every
// surface while deliveries are still taken locally; the WAL then grows by
// replication.DefaultMaxWALGrowth at most, past which deliveries get 503
// and /readyz is unready; once the files can be written the next cut
// captures the WAL and Litestream checkpoints it, deliveries are taken
// again, the replica catches up, and a restore of it verifies and holds
// every acknowledged event.
func TestReplicationCaptureFails(t *testing.T) {
	bin := testenv.Binary(t)
	e := newReplEnv(t, bin, 100*time.Millisecond, 100*time.Millisecond)
	const token = "e2e-admin-token-0123456789"
	admin := testenv.FreeAddr(t)
	if err := os.WriteFile(e.path("hookledger.yml"), fmt.Appendf(nil, `admin:
  listen: %s
  tokens: [%q]
providers:
  - name: default
    scheme: standard
    secrets: [%q]
`, admin, token, e2e.Secret), 0o600); err != nil {
		t.Fatal(err)
	}
	get := func(url string, auth bool) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if auth {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	replicationUp := func() string {
		_, body := get("http://"+admin+"/metrics", true)
		return regexp.MustCompile(`(?m)^hookledger_replication_up (\S+)$`).FindString(body)
	}
	cmd, stderr, url := e.serve()
	// A delivery of about 200 KB: the WAL grows by about that much a commit.
	pad := strings.Repeat("x", 200_000)
	send := func(id string) (int, string) {
		t.Helper()
		body := fmt.Appendf(nil, `{"type":"usage.recorded","data":{"customer":"cus_1","meter":"api","quantity":1,"occurred_at":"2026-11-29T10:00:00Z","pad":%q}}`, pad)
		req, _ := http.NewRequest(http.MethodPost, url+"/webhooks/default", bytes.NewReader(body))
		if err := testenv.SignStandard(req.Header, e2e.Secret, id, "", body, time.Now()); err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var acked []string
	mustAck := func(id string) {
		t.Helper()
		if code, body := send(id); code != 200 {
			t.Fatalf("%s: %d %s; want 200", id, code, body)
		}
		acked = append(acked, id)
	}
	for i := range 5 {
		mustAck(fmt.Sprintf("before-%d", i))
	}
	await.Eventually(t, time.Minute, "replicating", func() bool { return replicationUp() == "hookledger_replication_up 1" })

	// Block Litestream's next LTX files. A cut may be under way (its
	// staging file is where the first block goes): then try again.
	var blocks []string
	for attempt := 0; blocks == nil; attempt++ {
		local, _, err := replication.LocalTXID(e.db())
		if err != nil {
			t.Fatal(err)
		}
		for txid := local + 1; txid <= local+3; txid++ {
			dir := filepath.FromSlash(litestream.LTXFilePath(replication.MetaPath(e.db()), 0, txid, txid)) + ".tmp"
			err := os.MkdirAll(dir, 0o700)
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, "block"), nil, 0o600)
			}
			if err != nil && attempt < 20 {
				for _, d := range blocks {
					os.RemoveAll(d)
				}
				blocks = nil
				time.Sleep(50 * time.Millisecond)
				break
			} else if err != nil {
				t.Fatal(err)
			}
			blocks = append(blocks, dir)
		}
	}
	mustAck("during-0") // taken locally: the WAL has room
	await.Eventually(t, time.Minute, "reported down in the metrics", func() bool { return replicationUp() == "hookledger_replication_up 0" })
	if code, body := get(url+"/readyz", false); code != 200 || !strings.Contains(body, `"replication":"failing"`) {
		t.Errorf("/readyz while cuts fail, before the WAL bound: %d %s; want ready, replication failing", code, body)
	}
	await.Eventually(t, time.Minute, "in replica status", func() bool {
		out, _ := e.run("replica", "status")
		return strings.Contains(out, "cannot capture the WAL")
	})

	// Deliveries are taken until the WAL has grown by the bound; then 503.
	walSize := func() int64 {
		fi, err := os.Stat(e.db() + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	base := walSize()
	refused := ""
	for i := 1; refused == "" && i < 2000; i++ {
		id := fmt.Sprintf("during-%d", i)
		switch code, body := send(id); code {
		case 200:
			acked = append(acked, id)
		case http.StatusServiceUnavailable:
			refused = id
		default:
			t.Fatalf("%s: %d %s", id, code, body)
		}
	}
	if refused == "" {
		t.Fatalf("no 503 after the WAL grew %d bytes", walSize()-base)
	}
	// One commit may cross the bound; none follows it.
	if limit := base + replication.DefaultMaxWALGrowth + 1<<20; walSize() > limit {
		t.Errorf("WAL %d bytes; want at most %d", walSize(), limit)
	}
	full := walSize()
	for i := range 5 {
		if code, body := send(fmt.Sprintf("refused-%d", i)); code != http.StatusServiceUnavailable {
			t.Fatalf("past the WAL bound: %d %s; want 503", code, body)
		}
	}
	if walSize() != full {
		t.Errorf("the WAL grew from %d to %d bytes past the bound", full, walSize())
	}
	if code, body := get("http://"+admin+"/readyz", true); code != http.StatusServiceUnavailable || !strings.Contains(body, "the WAL is full") ||
		!strings.Contains(body, "cannot capture the WAL") {
		t.Errorf("admin /readyz past the WAL bound: %d %s; want unready, the database check saying the WAL is full, replication why", code, body)
	}
	salt := func() string {
		f, err := os.Open(e.db() + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		hdr := make([]byte, 24)
		if _, err := io.ReadFull(f, hdr); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%x", hdr[16:24])
	}
	saltFull := salt()

	for _, dir := range blocks {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	}
	// The sender's retry is taken, once, as soon as the WAL is captured.
	await.Eventually(t, time.Minute, "taking deliveries again", func() bool {
		code, body := send(refused)
		if code == 200 && strings.Contains(body, `"duplicate":true`) {
			t.Fatalf("%s: %s; it was refused, so it cannot be a duplicate", refused, body)
		}
		return code == 200
	})
	acked = append(acked, refused)
	await.Eventually(t, time.Minute, "reported up", func() bool { return replicationUp() == "hookledger_replication_up 1" })
	for i := range 5 {
		mustAck(fmt.Sprintf("after-%d", i))
	}
	if salt() == saltFull {
		t.Errorf("the WAL was not restarted after the capture: Litestream did not checkpoint it")
	}
	await.Eventually(t, time.Minute, "in sync", func() bool {
		out, _ := e.run("replica", "status", "--format", "json")
		return strings.Contains(out, `"in_sync": true`) && strings.Contains(out, `"wal_state": "captured"`)
	})
	e.stop(cmd, stderr)

	e.removeDB()
	e.mustRun("restore")
	e.mustRun("verify")
	var n int
	db := e2e.OpenRO(t, e.db())
	for _, id := range acked {
		var one int
		db.QueryRow(`SELECT COUNT(*) FROM receipts WHERE event_id = ?`, id).Scan(&one)
		n += one
	}
	var refusedRows int
	db.QueryRow(`SELECT COUNT(*) FROM receipts WHERE event_id LIKE 'refused-%'`).Scan(&refusedRows)
	if n != len(acked) || refusedRows != 0 {
		t.Errorf("restored %d of the %d acknowledged events, and %d refused ones; want all, and none", n, len(acked), refusedRows)
	}
}
