package custody_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/invoice"
)

// creditConfig is the configuration of the credit tests: the default
// provider and usage.recorded mapping, api_requests priced 0.01 each by
// the plan "credit" (the default plan), its limits and the credits
// section as given, and a destination "app" for credit alerts. Parsed, so
// a limit of kind credit takes config's own path.
func creditConfig(t testing.TB, limits, credits string) *config.Config {
	t.Helper()
	src := `providers:
  - name: default
    scheme: standard
    secrets: ["` + testenv.Secret + `"]
usage:
  - type: usage.recorded
    customer: data.customer
    meter: data.meter
    quantity: data.quantity
    occurred_at: data.occurred_at
meters:
  - name: api_requests
plans:
  - name: credit
    currency: USD
    effective_from: 2026-01-01
    prices:
      - {meter: api_requests, model: unit, unit: "0.01"}
` + limits + `customers:
  default_plan: credit
destinations:
  - name: app
    url: http://127.0.0.1:1/hooks
    secrets: ["whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"]
    events: {types: ["credits.balance_low", "credits.depleted"]}
` + credits
	dir := t.TempDir()
	c, err := config.Parse([]byte(src), dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// creditAlerts are the alerts of the hand-computed tests: 25% of a grant,
// 10.00 and depleted.
const creditAlerts = "credits:\n  alerts:\n    balance_low: [\"25%\", \"10.00\"]\n    depleted: true\n"

// newCreditEnv is the write path (writer.New, as serve builds it) with
// creditConfig, its usage state built.
func newCreditEnv(t testing.TB, backend, limits, credits string) *env {
	t.Helper()
	e := &env{testenv.New(t, testenv.Options{Backend: backend, Config: creditConfig(t, limits, credits)})}
	if built, err := e.Writer.BuildUsageState(t.Context(), "UTC"); err != nil || !built {
		t.Fatalf("build usage state: %v %v", built, err)
	}
	return e
}

// grantCredit grants amount USD to cus_1 under id, with priority.
func grantCredit(t testing.TB, e *env, id, amount string, priority int64) {
	t.Helper()
	if err := e.Writer.Submit(t.Context(), grantOp(id, amount, priority)); err != nil {
		t.Fatal(err)
	}
}

func grantOp(id, amount string, priority int64) *custody.GrantCredit {
	return &custody.GrantCredit{Request: invoice.GrantRequest{ID: id, Customer: "cus_1", Currency: "USD", Amount: amount,
		Category: "paid", Priority: priority, Reason: "prepaid", Actor: "ops"}}
}

// usageOp is a usage.recorded delivery of cus_1's api_requests, mapped as
// the handler maps it.
func usageOp(e *env, id, quantity string) *custody.Delivery {
	body := testenv.UsageBody("cus_1", "api_requests", quantity)
	sum := sha256.Sum256(body)
	d := &custody.Delivery{Provider: "default", EventID: id, EventType: "usage.recorded", Body: body, BodySHA256: sum[:],
		Source: custody.SourceWebhook, HandlerVersion: "test", ReceivedAt: e.Now(), Attempt: custody.Attempt{StatusCode: 200}}
	d.Classify(e.Mapper())
	return d
}

type creditCrossingRow struct {
	GrantID   string `db:"grant_id"`
	Threshold string `db:"threshold"`
	Value     string `db:"threshold_value"`
	Balance   string `db:"balance"`
	Drawn     string `db:"drawn"`
	Available string `db:"available"`
	RowID     int64  `db:"row_id"`
	ReceiptID int64  `db:"receipt_id"`
}

func (c creditCrossingRow) String() string {
	return fmt.Sprintf("%s %s (%s): balance %s drawn %s available %s", c.GrantID, c.Threshold, c.Value, c.Balance, c.Drawn, c.Available)
}

func creditCrossings(t testing.TB, e *env) []creditCrossingRow {
	t.Helper()
	var cs []creditCrossingRow
	if err := e.DB.Read.Select(&cs, `SELECT grant_id, threshold, threshold_value, balance, drawn, available, row_id, receipt_id
		FROM credit_crossings ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	return cs
}

// submitOneBatch runs ops in one batch of the writer: an op ahead of them
// holds the writer until all of them are queued, so the next batch drains
// them together. errs are theirs.
func submitOneBatch(t *testing.T, e *env, ops ...custody.Op) []error {
	t.Helper()
	var once sync.Once
	started, release, held := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		held <- e.Writer.Submit(context.Background(), custody.OpFunc(func(context.Context, *custody.Tx) error {
			once.Do(func() { close(started) })
			<-release
			return nil
		}))
	}()
	<-started
	errs := make(chan []error, 1)
	go func() { errs <- e.Writer.SubmitAll(context.Background(), ops) }()
	await.Eventually(t, 10*time.Second, "the ops queued behind the writer", func() bool { return e.Writer.Depth() == len(ops) })
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	return <-errs
}
