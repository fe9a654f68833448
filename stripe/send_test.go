package stripe

import (
	"testing"
	"time"

	"github.com/hookledger/hookledger/schema"
)

func TestPlan(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	nov := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	dec := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	old := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC).Unix() // past Stripe's 35 days at now
	push := func(id int64, customer string, period, ts int64, value string) schema.StripePush {
		return schema.StripePush{ID: id, Identifier: Identifier("p", string(rune('a'+id))), CustomerID: customer, Meter: "api",
			EventName: "api", PeriodStart: period, Timestamp: ts, Value: value, Quantity: value, Rows: 1}
	}
	t1, t2 := now.Add(-2*time.Hour).Unix(), now.Add(-time.Hour).Unix()
	a1, a2 := push(1, "a", dec, t1, "2"), push(2, "a", dec, t2, "3")
	b1 := push(3, "b", dec, t1, "7")
	a3 := push(4, "a", nov, old, "-20") // a credit to a month Stripe's window has passed
	a4 := push(5, "a", dec, t2, "-2")   // a void's cancel of a1
	a4.Cancels = a1.Identifier
	a5 := push(6, "a", dec, t2, "4")
	c1 := push(7, "c", dec, t1, "9") // a stream push of three rows
	c1.Rows = 3
	pairs, err := Plan([]schema.StripePush{a1, b1, a2, a3, a4, a5, c1}, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(pairs) != 3 {
		t.Fatalf("%d pairs, want a's, b's and c's", len(pairs))
	}
	a, b, c := pairs[0], pairs[1], pairs[2]
	// a: a1 and a2 summed (December), a3 alone (November, carried), the
	// cancel a4 alone, then a5 alone under its own identifier.
	if len(a) != 4 {
		t.Fatalf("a's sends: %+v, want 4", a)
	}
	sum := a[0]
	if !sum.New || sum.Value != "5" || sum.Count != 2 || sum.Timestamp != t2 || sum.Carried != 0 ||
		sum.Identifier != Identifier("sum", a1.Identifier, "1", "2", a2.Identifier, "1", "3") || len(sum.Pushes) != 2 {
		t.Errorf("a's first send %+v, want a1+a2 = 5 at a2's time under a derived identifier", sum)
	}
	if c := a[1]; c.Value != "-20" || c.Identifier != a3.Identifier || c.Carried != 1 || c.Timestamp != now.Unix() {
		t.Errorf("the credit's send %+v, want -20 under its own identifier, carried, stamped now", c)
	}
	if c := a[2]; !c.Cancel() || c.Identifier != a4.Identifier || c.Count != 1 {
		t.Errorf("the cancel's send %+v, want it alone", c)
	}
	if c := a[3]; c.Identifier != a5.Identifier || c.Value != "4" {
		t.Errorf("a's last send %+v, want a5 alone", c)
	}
	if len(b) != 1 || b[0].Identifier != b1.Identifier || b[0].Value != "7" {
		t.Errorf("b's sends %+v, want b1 alone", b)
	}
	// A push of several rows goes under an identifier of what it carries:
	// left open by a restore, it may have taken rows since Stripe took it
	// under its first row's identifier.
	if len(c) != 1 || c[0].Identifier != Identifier("sum", c1.Identifier, "3", "9") || c[0].Value != "9" {
		t.Errorf("c's sends %+v, want c1 under a derived identifier", c)
	}

	// Sent again after a restart: the stored send as it was, with the
	// pushes of it that were claimed; a stored time the window has passed
	// since is moved to now.
	a1.Send = schema.StripeSend{Identifier: sum.Identifier, Value: "5", Count: 2, Timestamp: t2}
	a2.Send = a1.Send
	a3.Send = schema.StripeSend{Identifier: a3.Identifier, Value: "-20", Count: 1, Timestamp: old}
	pairs, err = Plan([]schema.StripePush{a2, a1, a3}, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(pairs) != 1 || len(pairs[0]) != 2 {
		t.Fatalf("sends %+v, want the stored two", pairs)
	}
	if s := pairs[0][0]; s.New || s.Restamp || s.Identifier != sum.Identifier || s.Value != "5" || len(s.Pushes) != 2 {
		t.Errorf("the stored sum sent again as %+v", s)
	}
	if s := pairs[0][1]; s.New || !s.Restamp || s.Timestamp != now.Unix() || s.Carried != 1 {
		t.Errorf("the stored credit sent again as %+v, want restamped now", s)
	}

	// A value that is not a number is refused, not sent.
	bad := push(9, "c", dec, t1, "x")
	if _, err := Plan([]schema.StripePush{bad}, now); err == nil {
		t.Error("a push valued x was planned")
	}
}
