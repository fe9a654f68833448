package schema

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"
)

// On PostgreSQL one index over receipts holds the event id, the unique
// btree on (provider, hookledger_key(event_id)) (migration 0025 dropped the
// hash index on the raw column, which took every new random id on a page of
// its own), and every lookup of a receipt by event id goes through it. The
// lookups run here as the code runs them, on connections that plan each
// statement with sequential scans disabled and record the plan first: a
// lookup that the btree cannot serve would still plan a sequential scan of
// receipts (a read of the whole table per event at 10,000,000 receipts)
// without failing any other test.
func TestEventLookupsUseReceiptsKeyOnPostgres(t *testing.T) {
	ctx := context.Background()
	url := freshPostgres(t)
	db, err := Open(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.Write.MustExec(`INSERT INTO receipts (id, provider, event_id, body_sha256, status, handler_version, source, received_at, processed_at)
		VALUES (1, 'stripe', 'evt_1', '\x00', 'applied', 'v1', 'webhook', 0, 0), (2, 'stripe', 'evt_2', '\x00', 'failed', 'v1', 'webhook', 0, 0)`)
	db.Write.MustExec(`INSERT INTO metered_usage (id, kind, provider, event_id, customer_id, meter, quantity, occurred_at, recorded_at,
		prev_hash, row_hash, receipt_id) VALUES (1, 'usage', 'stripe', 'evt_1', 'cus_1', 'api_requests', 1, 0, 0, '\x', '\x', 1)`)
	// The trigger that checks an attempt names a receipt runs its probe.
	db.Write.MustExec(`INSERT INTO delivery_attempts (provider, event_id, received_at, body_sha256, outcome, status_code)
		VALUES ('stripe', 'evt_1', 5, '\x01', 'payload_mismatch', 200)`)
	db.Write.MustExec(`INSERT INTO replays (provider, event_id, replayed_at, from_status, to_status, from_handler_version, handler_version)
		VALUES ('stripe', 'evt_2', 6, 'failed', 'failed', 'v1', 'v1')`)
	db.Write.MustExec(`INSERT INTO outbox (receipt_id, destination, message_id, status, created_at, pending_since, next_attempt_at)
		VALUES (1, 'app', 'msg_1', 'pending', 0, 0, 0)`)
	if _, err := db.Write.Exec(`INSERT INTO delivery_attempts (provider, event_id, received_at, body_sha256, outcome, status_code)
		VALUES ('stripe', 'evt_none', 5, '\x01', 'duplicate', 200)`); err == nil {
		t.Fatal("an attempt naming no receipt was stored")
	}
	// Enough receipts of the provider, with statistics, that reading all of
	// them costs the planner more than probing the digests: the plans are
	// then the ones a real ledger gets.
	db.Write.MustExec(`INSERT INTO receipts (id, provider, event_id, body_sha256, status, handler_version, source, received_at, processed_at)
		SELECT 100 + g, 'stripe', 'evt_x' || g, '\x00', 'applied', 'v1', 'webhook', 0, 0 FROM generate_series(1, 5000) AS g`)
	// And a ledger of 5,000 rows over 50 customers, for the reads by
	// customer.
	db.Write.MustExec(`INSERT INTO metered_usage (id, kind, provider, event_id, customer_id, meter, quantity, occurred_at, recorded_at,
		prev_hash, row_hash, receipt_id) SELECT 100 + g, 'usage', 'stripe', 'evt_x' || g, 'cus_' || (g % 50), 'api_requests', 1, g, g,
		'\x', '\x', 100 + g FROM generate_series(1, 5000) AS g`)
	db.Write.MustExec(`ANALYZE`)

	var indexes []string
	if err := db.Read.Select(&indexes, `SELECT indexname FROM pg_indexes WHERE tablename = 'receipts' AND indexdef LIKE '%event_id%'
		ORDER BY indexname`); err != nil {
		t.Fatal(err)
	}
	if strings.Join(indexes, ",") != "receipts_key" {
		t.Errorf("indexes over receipts' event id: %v, want receipts_key alone", indexes)
	}
	var hashes []string
	if err := db.Read.Select(&hashes, `SELECT indexname FROM pg_indexes WHERE tablename = 'metered_usage' AND indexdef LIKE '%USING hash (customer_id)%'`); err != nil {
		t.Fatal(err)
	}
	if len(hashes) > 0 {
		t.Errorf("hash indexes on metered_usage's customer_id: %v (each insert walks the customer's bucket chain)", hashes)
	}

	rec := &planRecorder{}
	read, write := db.Read, db.Write
	db.Read, db.Write = rec.open(t, url), rec.open(t, url)
	defer func() { db.Read.Close(); db.Write.Close(); db.Read, db.Write = read, write }()

	if ok, err := db.HasReceipt(ctx, "stripe", "evt_1"); err != nil || !ok {
		t.Fatalf("HasReceipt: %v, %v", ok, err)
	}
	if ids, err := db.ReceiptsPresent(ctx, "stripe", []string{"evt_1", "evt_2", "evt_3"}); err != nil || len(ids) != 2 {
		t.Fatalf("ReceiptsPresent: %v, %v", ids, err)
	}
	if rs, err := db.ReceiptsByEventID(ctx, []string{"stripe", "github"}, "evt_1"); err != nil || len(rs) != 1 {
		t.Fatalf("ReceiptsByEventID: %v, %v", rs, err)
	}
	if ms, err := db.ReceiptMessages(ctx, "stripe", "evt_1"); err != nil || len(ms) != 1 {
		t.Fatalf("ReceiptMessages: %v, %v", ms, err)
	}
	if rows, err := db.EventLedgerRows(ctx, "stripe", "evt_1"); err != nil || len(rows) != 1 {
		t.Fatalf("EventLedgerRows: %v, %v", rows, err)
	}
	r := EventRange{Provider: "stripe", IDs: []string{"evt_1", "evt_2"}}
	if n, err := db.ReceiptsInRange(ctx, r); err != nil || n != 2 {
		t.Fatalf("ReceiptsInRange: %d, %v", n, err)
	}
	if _, err := db.AttemptOutcomesInRange(ctx, r); err != nil {
		t.Fatal(err)
	}
	if ms, err := db.PayloadMismatches(ctx, MismatchFilter{Limit: 10}); err != nil || len(ms) != 1 {
		t.Fatalf("PayloadMismatches: %v, %v", ms, err)
	}
	if err := db.View(ctx, func(tx *ReadTx) error {
		if rs, err := tx.EventReceipts(ctx, "stripe", []string{"evt_1", "evt_2"}); err != nil || len(rs) != 2 {
			return errors.Join(err, errors.New("EventReceipts: not 2 receipts"))
		}
		_, err := tx.EventAttempts(ctx, "stripe", []string{"evt_1"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// Reads of a customer's rows (invoicing, usage, corrections).
	f := LedgerFilter{Customer: "cus_1", Meter: "api_requests", From: 1, To: 10_000}
	n := 0
	if err := db.ScanUsage(ctx, UsageScan{Filter: f}, func(*UsageRow) error { n++; return nil }); err != nil || n != 100 {
		t.Fatalf("ScanUsage: %d rows, %v", n, err)
	}
	if err := db.ScanLedger(ctx, f, func(*LedgerRow) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := db.LedgerMeters(ctx, LedgerFilter{Customer: "cus_1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.AdjustmentsOf(ctx, "cus_1", []string{"row:1"}); err != nil {
		t.Fatal(err)
	}
	w, err := db.OpenWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	b, err := w.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.GetReceipt(ctx, "stripe", "evt_2")
	if err != nil {
		t.Fatal(err)
	}
	got.ProcessedAt = 7
	if err := b.UpdateReceiptStatus(ctx, got); err != nil {
		t.Fatal(err)
	}
	// The batch's read of which keys exist (pgLookupSQL).
	if sha, status, err := b.StoredReceipt(ctx, "stripe", "evt_1"); err != nil || status != "applied" || len(sha) != 1 {
		t.Fatalf("StoredReceipt: %x %q %v", sha, status, err)
	}
	b.Rollback()

	plans := rec.plans()
	if len(plans) < 12 {
		t.Fatalf("%d statements planned, want every lookup's", len(plans))
	}
	for _, p := range plans {
		t.Logf("%s\n%s", p.query, p.plan)
		// A customer's rows through a btree on the id's digest (by row, or
		// by event time: 0036) or, for corrections, their own partial
		// index, never a read of the table.
		if strings.Contains(p.query, "FROM metered_usage") && strings.Contains(p.query, "customer_id = ") &&
			(strings.Contains(p.plan, "Seq Scan on metered_usage") || !strings.Contains(p.plan, "metered_usage_customer_rows") &&
				!strings.Contains(p.plan, "metered_usage_customer_time") && !strings.Contains(p.plan, "metered_usage_corrections")) {
			t.Errorf("a read of a customer's rows does not go through metered_usage_customer_rows or _time:\n%s\n%s", p.query, p.plan)
		}
		if !strings.Contains(p.query, "FROM receipts") && !strings.Contains(p.query, "UPDATE receipts") &&
			!strings.Contains(p.query, "JOIN receipts") {
			continue
		}
		if strings.Contains(p.plan, "Seq Scan on receipts") || !probesDigest(p.plan) {
			t.Errorf("a lookup of receipts by event id does not probe receipts_key by the id's digest:\n%s\n%s", p.query, p.plan)
		}
	}
}

// probesDigest reports whether plan reads receipts only through
// receipts_key, each time with the event id's digest in the index
// condition (not only the provider, which would read all its receipts).
func probesDigest(plan string) bool {
	probes, digest := 0, 0
	lines := strings.Split(plan, "\n")
	for i, line := range lines {
		// Scans of receipts (a bitmap scan's heap node has its index
		// scan below it, checked there).
		if !strings.Contains(line, "Scan") || !strings.Contains(line, " on receipts") ||
			strings.Contains(line, "Bitmap Heap Scan") {
			continue
		}
		if !strings.Contains(line, "receipts_key") {
			return false // another index of receipts, or none
		}
		probes++
		for _, next := range lines[i+1:] {
			if strings.Contains(next, "Index Cond:") {
				if strings.Contains(next, "hookledger_key(event_id) =") {
					digest++
				}
				break
			}
		}
	}
	return probes > 0 && probes == digest
}

// freshPostgres is the URL of a new database on HOOKLEDGER_TEST_POSTGRES's
// server, dropped when the test ends.
func freshPostgres(t *testing.T) string {
	t.Helper()
	server := os.Getenv("HOOKLEDGER_TEST_POSTGRES")
	if server == "" {
		if os.Getenv("HOOKLEDGER_CI") != "" {
			t.Fatal("HOOKLEDGER_TEST_POSTGRES is not set")
		}
		t.Skip("HOOKLEDGER_TEST_POSTGRES is not set")
	}
	var b [6]byte
	rand.Read(b[:])
	name := "hookledger_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url, err := CreatePostgresDatabase(ctx, server, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := DropPostgresDatabase(context.Background(), server, name); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	return url
}

// planRecorder opens handles whose connections plan every statement with
// sequential scans disabled (EXPLAIN, the statement's own arguments) and
// record the plan before running it.
type planRecorder struct {
	mu  sync.Mutex
	got []plannedStatement
}

type plannedStatement struct{ query, plan string }

func (r *planRecorder) open(t *testing.T, url string) *sqlx.DB {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["enable_seqscan"] = "off"
	return sqlx.NewDb(sql.OpenDB(planningConnector{rebindConnector{stdlib.GetConnector(*cfg)}, r}), pgDriverName)
}

func (r *planRecorder) plans() []plannedStatement {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]plannedStatement(nil), r.got...)
}

type planningConnector struct {
	rebindConnector
	rec *planRecorder
}

func (c planningConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.rebindConnector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return planningConn{conn.(rebindConn), c.rec}, nil
}

type planningConn struct {
	rebindConn
	rec *planRecorder
}

func (c planningConn) plan(ctx context.Context, query string, args []driver.NamedValue) error {
	switch strings.ToUpper(strings.Fields(query)[0]) {
	case "SELECT", "WITH", "INSERT", "UPDATE", "DELETE":
	default:
		return nil // BEGIN, SET, EXPLAIN: nothing to plan
	}
	rows, err := c.rebindConn.QueryContext(ctx, "EXPLAIN "+query, args)
	if err != nil {
		return err
	}
	defer rows.Close()
	var lines []string
	row := make([]driver.Value, 1)
	for {
		if err := rows.Next(row); err == io.EOF {
			break
		} else if err != nil {
			return err
		}
		lines = append(lines, row[0].(string))
	}
	c.rec.mu.Lock()
	defer c.rec.mu.Unlock()
	c.rec.got = append(c.rec.got, plannedStatement{query, strings.Join(lines, "\n")})
	return nil
}

func (c planningConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if err := c.plan(ctx, query, args); err != nil {
		return nil, err
	}
	return c.rebindConn.QueryContext(ctx, query, args)
}

func (c planningConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if err := c.plan(ctx, query, args); err != nil {
		return nil, err
	}
	return c.rebindConn.ExecContext(ctx, query, args)
}
