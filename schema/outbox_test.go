package schema

import (
	"context"
	"errors"
	"os"
	"testing"
)

// 0007 adds the outbox to a database made before it and keeps every row.
func TestOutboxMigrationKeepsData(t *testing.T) {
	path, old := openAt(t, 6)
	fillCustody(t, old)
	queries := []string{receiptsAt8, `SELECT * FROM delivery_attempts ORDER BY id`}
	before := dumps(t, old, queries)
	old.Close()

	ctx := context.Background()
	db, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, err := db.SchemaVersion(ctx); err != nil || v < versionOutbox {
		t.Fatalf("version %d (%v), want at least %d", v, err, versionOutbox)
	}
	keptRows(t, db.Write, queries, before)

	b := beginBatch(t, db)
	if err := b.InsertOutbox(ctx, 7, "app", "msg_a", 100); err != nil {
		t.Fatal(err)
	}
	if err := b.InsertOutbox(ctx, 7, "app", "msg_b", 100); err == nil {
		t.Error("a second message for the same receipt and destination was accepted")
	}
	if err := b.InsertOutbox(ctx, 99, "app", "msg_c", 100); err == nil {
		t.Error("a message for a receipt that does not exist was accepted")
	}
	claims, err := b.ClaimOutbox(ctx, "app", 100, 5000, 10)
	if err != nil || len(claims) != 1 || claims[0].MessageID != "msg_a" {
		t.Fatalf("claim: %+v %v", claims, err)
	}
	if again, err := b.ClaimOutbox(ctx, "app", 200, 5000, 10); err != nil || len(again) != 0 {
		t.Errorf("a claimed message was claimed again within its lease: %+v %v", again, err)
	}
	if err := b.RecordOutboxResults(ctx, []OutboxResult{{ID: claims[0].ID, Status: OutboxDead, AttemptedAt: 300, NextAttemptAt: 300,
		StatusCode: 500, Error: "HTTP 500"}}); err != nil {
		t.Fatal(err)
	}
	// A dead message keeps its receipt whole through both prunes.
	if ids, _, err := b.PruneReceipts(ctx, PruneKeys, []int64{7}, 1<<40); err != nil || len(ids) != 0 {
		t.Errorf("prune keys deleted %v (%v), want nothing: the outbox still holds the receipt", ids, err)
	}
	if ids, _, err := b.PruneReceipts(ctx, PruneBodies, []int64{7}, 1<<40); err != nil || len(ids) != 0 {
		t.Errorf("prune bodies changed %v (%v), want nothing", ids, err)
	}
	if _, err := b.RetryOutbox(ctx, OutboxRetry{MessageID: "msg_nope"}, 400); !errors.Is(err, ErrNotFound) {
		t.Errorf("retry of an unknown message: %v, want ErrNotFound", err)
	}
	if n, err := b.RetryOutbox(ctx, OutboxRetry{Destination: "app"}, 400); err != nil || n != 1 {
		t.Errorf("retry: %d %v, want 1", n, err)
	}
	claims, err = b.ClaimOutbox(ctx, "app", 400, 5000, 10)
	if err != nil || len(claims) != 1 || claims[0].Attempts != 0 || claims[0].PendingSince != 400 {
		t.Fatalf("claim after retry: %+v %v (want a fresh allowance)", claims, err)
	}
	if err := b.RecordOutboxResults(ctx, []OutboxResult{{ID: claims[0].ID, Status: OutboxDelivered, AttemptedAt: 500, NextAttemptAt: 500,
		StatusCode: 204}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.RetryOutbox(ctx, OutboxRetry{MessageID: "msg_a"}, 600); !errors.Is(err, ErrDelivered) {
		t.Errorf("retry of a delivered message: %v, want ErrDelivered", err)
	}
	// Delivered, the receipt may go, and its message and attempts with it.
	if ids, _, err := b.PruneReceipts(ctx, PruneKeys, []int64{7}, 1<<40); err != nil || len(ids) != 1 {
		t.Errorf("prune keys after delivery: %v %v, want [7]", ids, err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	for table, want := range map[string]int64{"outbox": 0, "outbox_attempts": 0} {
		if n, err := db.CountRows(ctx, table); err != nil || n != want {
			t.Errorf("%s: %d rows (%v), want %d", table, n, err, want)
		}
	}
}

// A read-only open of a database older than the outbox reports none.
func TestOutboxReadsOnOlderDatabase(t *testing.T) {
	path, old := openAt(t, 6)
	fillCustody(t, old)
	old.Close()
	db, err := Open(context.Background(), path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sums, err := db.OutboxSummary(context.Background(), []string{"app"})
	if err != nil || len(sums) != 1 || sums[0].Pending != 0 {
		t.Errorf("summary: %+v %v", sums, err)
	}
	if rows, err := db.ListOutbox(context.Background(), OutboxFilter{}); err != nil || len(rows) != 0 {
		t.Errorf("list: %+v %v", rows, err)
	}
}

// 0035 counts the delivered messages a database already holds, and the count
// follows every later delivery and delete: the relay's, retention's prune of
// delivered messages and a pruned receipt's cascade.
func TestOutboxDeliveredCount(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			if backend == "sqlite" && os.Getenv("HOOKLEDGER_TEST_BACKEND") == "postgres" {
				t.Skip("ran in the SQLite pass")
			}
			testOutboxDeliveredCount(t, backend)
		})
	}
}

func testOutboxDeliveredCount(t *testing.T, backend string) {
	ctx := context.Background()
	path, old := previousRelease(t, backend, versionOutboxDelivered)
	fillPreviousRelease(t, old) // receipts 7 and 9
	old.MustExec(`INSERT INTO outbox (receipt_id, destination, message_id, status, created_at, pending_since, next_attempt_at, delivered_at)
		VALUES (7, 'app', 'msg_1', 'delivered', 100, 100, 100, 100), (9, 'app', 'msg_2', 'pending', 100, 100, 100, NULL),
		(7, 'crm', 'msg_3', 'delivered', 100, 100, 100, 100)`)
	old.MustExec(`INSERT INTO forward_destinations (name, updated_at) VALUES ('app', 100), ('crm', 100)`)
	old.Close()
	db, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	counts := func(when string, want map[string]int64) {
		t.Helper()
		sums, err := db.OutboxSummary(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, s := range sums {
			var n int64
			if err := db.Read.GetContext(ctx, &n, db.Read.Rebind(`SELECT COUNT(*) FROM outbox WHERE destination = ? AND status = 'delivered'`), s.Name); err != nil {
				t.Fatal(err)
			}
			if s.Delivered != n {
				t.Errorf("%s: %s shows %d delivered, the outbox holds %d", when, s.Name, s.Delivered, n)
			}
			got[s.Name] = s.Delivered
		}
		for name, n := range want {
			if got[name] != n {
				t.Errorf("%s: %s has %d delivered; want %d", when, name, got[name], n)
			}
		}
	}
	counts("after the migration", map[string]int64{"app": 1, "crm": 1})

	b := beginBatch(t, db)
	claims, err := b.ClaimOutbox(ctx, "app", 200, 5000, 10)
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim: %+v %v", claims, err)
	}
	if err := b.RecordOutboxResults(ctx, []OutboxResult{{ID: claims[0].ID, Status: OutboxDelivered, AttemptedAt: 300, NextAttemptAt: 300, StatusCode: 204},
		{ID: claims[0].ID, Status: OutboxDelivered, AttemptedAt: 301, NextAttemptAt: 301, StatusCode: 204}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	counts("after a delivery (recorded twice)", map[string]int64{"app": 2, "crm": 1})

	b = beginBatch(t, db)
	if n, err := b.PruneDelivered(ctx, 150, 10); err != nil || n != 2 {
		t.Fatalf("prune delivered: %d %v; want msg_1 and msg_3", n, err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	counts("after retention's prune", map[string]int64{"app": 1, "crm": 0})

	b = beginBatch(t, db)
	if ids, _, err := b.PruneReceipts(ctx, PruneKeys, []int64{9}, 1<<40); err != nil || len(ids) != 1 {
		t.Fatalf("prune receipt 9: %v %v", ids, err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	counts("after a receipt's cascade", map[string]int64{"app": 0, "crm": 0})
}
