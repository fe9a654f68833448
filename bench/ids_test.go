package bench

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/schema"
)

func TestRandomEventIDs(t *testing.T) {
	stripe := regexp.MustCompile(`^evt_[0-9A-Za-z]{24}$`)
	const n = 100_000
	seen := make(map[string]int, n)
	first := make(map[byte]int) // first character after evt_
	for i := range n {
		id := RandomEventID("r1", i)
		if !stripe.MatchString(id) {
			t.Fatalf("id %d is %q, not evt_ and 24 base62 characters", i, id)
		}
		if j, dup := seen[id]; dup {
			t.Fatalf("events %d and %d share the id %s", j, i, id)
		}
		seen[id] = i
		first[id[4]]++
	}
	// Spread over the whole index: every base62 character starts some id,
	// none far more often than 1/62 of them.
	if len(first) != 62 {
		t.Fatalf("ids start with %d distinct characters, want 62", len(first))
	}
	for c, k := range first {
		if k > 2*n/62 {
			t.Errorf("%d of %d ids start with %q", k, n, c)
		}
	}
	// A pure function of run and index; another run gets other ids.
	if a, b := RandomEventID("r1", 7), RandomEventID("r1", 7); a != b {
		t.Fatalf("event 7 got %s and %s", a, b)
	}
	if _, clash := seen[RandomEventID("r2", 7)]; clash {
		t.Fatal("run r2's event 7 has an id of run r1")
	}
	if got := RandomEventID("r1", 0); got != "evt_PwP4hne6Ey0Idq8d1KcTmwIK" {
		t.Fatalf("event 0 of r1 is %s: the derivation changed, so ids of recorded runs would too", got)
	}
}

func TestParseIDs(t *testing.T) {
	for _, k := range []IDs{Sequential, Random} {
		if got, err := ParseIDs(k.String()); err != nil || got != k {
			t.Errorf("ParseIDs(%q) = %v, %v", k.String(), got, err)
		}
	}
	if _, err := ParseIDs("uuid"); err == nil {
		t.Error("ParseIDs accepted uuid")
	}
}

func TestPlanWithRandomIDs(t *testing.T) {
	l := testLoad(t, "http://127.0.0.1:1/webhooks/default", 50, 0.2)
	l.IDs = Random
	p, err := l.Plan(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range p.Events {
		if e.ID != RandomEventID(l.RunID, i) || p.StoredID(i) != e.ID {
			t.Fatalf("event %d has id %s (stored as %s), want %s", i, e.ID, p.StoredID(i), RandomEventID(l.RunID, i))
		}
	}
	for k, d := range p.deliveries {
		if id, _ := l.Scheme.Identify(d.header, d.body); id != p.Events[d.event].ID {
			t.Fatalf("delivery %d carries id %q, want %q", k, id, p.Events[d.event].ID)
		}
	}
	if r := p.stored("default"); len(r.IDs) != 50 || r.IDs[3] != p.Events[3].ID {
		t.Fatalf("verify selects %+v, want the 50 ids", r)
	}
	l.Batch, l.APIKey = 10, "hl_x"
	if p, err = l.Plan(time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := p.StoredID(3); got != APISource+"#"+RandomEventID(l.RunID, 3) {
		t.Fatalf("batch event 3 is stored as %s", got)
	}
}

// TestVerifyLooksUpManyRandomIDs selects more ids than one query carries
// (schema splits them): only the run's events count, wherever they are.
func TestVerifyLooksUpManyRandomIDs(t *testing.T) {
	e := testenv.New(t, testenv.Options{NoServer: true})
	if err := prefill(t, e.DB, Random, 30); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 25_000) // the 30 prefilled ones among ids stored nowhere
	for i := range ids {
		ids[i] = RandomEventID("absent", i)
		if i%1000 == 999 {
			ids[i] = PrefillEventID(Random, i/1000)
		}
	}
	ids = append(ids, PrefillEventID(Random, 25), PrefillEventID(Random, 26), PrefillEventID(Random, 27),
		PrefillEventID(Random, 28), PrefillEventID(Random, 29))
	r := schema.EventRange{Provider: "default", IDs: ids}
	ctx := context.Background()
	if n, err := e.DB.ReceiptsInRange(ctx, r); err != nil || n != 30 {
		t.Fatalf("%d receipts (%v), want 30", n, err)
	}
	if rows, err := e.DB.UsageInRange(ctx, r); err != nil || len(rows) != 30 {
		t.Fatalf("%d usage rows (%v), want 30", len(rows), err)
	}
	if o, err := e.DB.AttemptOutcomesInRange(ctx, r); err != nil || o["inserted"] != 30 || len(o) != 1 {
		t.Fatalf("attempts %v (%v), want 30 inserted", o, err)
	}
}
