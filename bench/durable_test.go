package bench

import (
	"context"
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/receiver"
)

// The durable reference under a real load: every event in its log once, in
// full, and no duplicate delivery in it.
func TestDurableReferenceLogsEveryEventOnce(t *testing.T) {
	cfg := defaultConfig(t)
	providers, err := receiver.NewProviders(cfg.Providers)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "reference.log")
	l, err := OpenDurableLog(path)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	(&Reference{Providers: providers, Mapper: ledger.NewMapper(cfg.Usage, cfg.MeterNames()), Custody: l}).Routes(mux)
	srv := httptest.NewServer(mux)
	p, err := testLoad(t, srv.URL+"/webhooks/default", 300, 0.2).Plan(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Run(context.Background(), nil)
	srv.Close()
	if err != nil {
		t.Fatal(err)
	}
	if out.Delivered != 360 || !out.Result.OK() {
		t.Fatalf("%d of 360 deliveries answered 2xx: %+v", out.Delivered, out.Result)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	records, err := ReadDurableLog(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, e := range p.Events {
		want[e.ID] = true
	}
	for _, r := range records {
		id := string(r[1])
		if string(r[0]) != "default" || !want[id] || len(r[2]) == 0 {
			t.Fatalf("unexpected or repeated record %q/%q (%d bytes)", r[0], id, len(r[2]))
		}
		delete(want, id)
	}
	if len(records) != 300 || len(want) != 0 {
		t.Fatalf("%d records, %d events missing; want 300 and 0", len(records), len(want))
	}
}

func TestDurableLogOutcomes(t *testing.T) {
	l, err := OpenDurableLog(filepath.Join(t.TempDir(), "reference.log"))
	if err != nil {
		t.Fatal(err)
	}
	submit := func(id, body string) custody.Outcome {
		t.Helper()
		sum := sha256.Sum256([]byte(body))
		d := &custody.Delivery{Provider: "p", EventID: id, Body: []byte(body), BodySHA256: sum[:], Status: custody.StatusIgnored}
		if err := l.Submit(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		return d.Outcome
	}
	for _, c := range []struct {
		id, body string
		want     custody.Outcome
	}{
		{"a", "{}", custody.OutcomeInserted},
		{"a", "{}", custody.OutcomeDuplicate},
		{"a", `{"x":1}`, custody.OutcomePayloadMismatch},
		{"b", "{}", custody.OutcomeInserted},
	} {
		if got := submit(c.id, c.body); got != c.want {
			t.Errorf("%s %s: %s, want %s", c.id, c.body, got, c.want)
		}
	}
	if err := l.Submit(context.Background(), custody.OpFunc(func(context.Context, *custody.Tx) error { return nil })); err == nil {
		t.Error("an op that is not a delivery was accepted")
	}
	l.Close()
	if err := l.Submit(context.Background(), &custody.Delivery{Provider: "p", EventID: "c"}); err != custody.ErrClosed {
		t.Errorf("Submit after Close: %v, want ErrClosed", err)
	}
}
