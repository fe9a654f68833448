package schema

import (
	"context"
	"net"
	"net/url"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
)

// CheckReads reads, in one group, exactly what the single reads give: the
// zone, the customer's assignments and overrides (not another customer's),
// each asked meter's usage state in the period containing the instant (not
// an earlier one's), and with spend every meter's state and the spend
// overrides. Before serve has built the state, Built is false.
func TestCheckReads(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			target := filepath.Join(t.TempDir(), FileName)
			if backend == "postgres" {
				target = freshPostgres(t)
			}
			db, err := Open(ctx, target, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			const jan, feb, mar = 1767225600000, 1769904000000, 1772323200000 // 2026-01-01, 02-01, 03-01 UTC
			at := int64(feb + 1000)

			r, err := db.CheckReads(ctx, "cus_a", []string{"calls"}, true, at)
			if err != nil || r.Built {
				t.Fatalf("before the state is built: %+v, %v; want not built", r, err)
			}
			db.Write.MustExec(`INSERT INTO usage_state_zone (one, zone, built_at, through) VALUES (1, 'UTC', 5, 7)`)
			for _, s := range []UsageState{
				{"cus_a", "calls", jan, feb, "10", 3},
				{"cus_a", "calls", feb, mar, "4", 9},
				{"cus_a", "gb", feb, mar, "1.5", 8},
				{"cus_a", "seats", feb, mar, "2", 6},
				{"cus_b", "calls", feb, mar, "99", 5},
			} {
				db.Write.MustExec(`INSERT INTO usage_state (`+usageStateCols+`) VALUES (?, ?, ?, ?, ?, ?)`,
					s.Customer, s.Meter, s.PeriodStart, s.PeriodEnd, s.Used, s.LastRowID)
			}
			for _, c := range []string{"cus_a", "cus_b"} {
				db.Write.MustExec(`INSERT INTO plan_assignments (customer_id, plan, effective_from, recorded_at) VALUES (?, 'pro', '2026-01-01', 1)`, c)
				if _, err := db.InsertLimitOverride(ctx, LimitOverride{Customer: c, Meter: "calls", Limit: "50", EffectiveFrom: "2026-02-01", RecordedAt: 2}); err != nil {
					t.Fatal(err)
				}
				if _, err := db.InsertSpendOverride(ctx, SpendOverride{Customer: c, Limit: "20.00", EffectiveFrom: "2026-02-01", RecordedAt: 3}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := db.InsertLimitOverride(ctx, LimitOverride{Customer: "cus_a", Meter: "gb", Limit: "2", Kind: "soft", EffectiveFrom: "2026-01-15", RecordedAt: 4}); err != nil {
				t.Fatal(err)
			}
			zone, _, err := db.StateZone(ctx)
			if err != nil {
				t.Fatal(err)
			}
			assignments, err := db.PlanAssignments(ctx, "cus_a")
			if err != nil {
				t.Fatal(err)
			}
			overrides, err := db.LimitOverrides(ctx, "cus_a", "")
			if err != nil {
				t.Fatal(err)
			}
			spendOverrides, err := db.SpendOverrides(ctx, "cus_a")
			if err != nil {
				t.Fatal(err)
			}
			all, err := db.UsageStates(ctx, "cus_a", at)
			if err != nil {
				t.Fatal(err)
			}
			if len(assignments) != 1 || len(overrides) != 2 || len(spendOverrides) != 1 || len(all) != 3 {
				t.Fatalf("the single reads: %d assignments, %d overrides, %d spend overrides, %d states", len(assignments), len(overrides), len(spendOverrides), len(all))
			}

			r, err = db.CheckReads(ctx, "cus_a", []string{"calls", "none", "gb"}, false, at)
			if err != nil {
				t.Fatal(err)
			}
			want := CheckReads{Zone: zone, Built: true, Assignments: assignments, LimitOverrides: overrides,
				States: []UsageState{{"cus_a", "calls", feb, mar, "4", 9}, {"cus_a", "gb", feb, mar, "1.5", 8}}}
			if !reflect.DeepEqual(r, want) {
				t.Fatalf("meters:\n got %+v\nwant %+v", r, want)
			}
			r, err = db.CheckReads(ctx, "cus_a", []string{"calls"}, true, at)
			if err != nil {
				t.Fatal(err)
			}
			want.States, want.SpendOverrides = all, spendOverrides
			if !reflect.DeepEqual(r, want) {
				t.Fatalf("spend:\n got %+v\nwant %+v", r, want)
			}
		})
	}
}

// On PostgreSQL a check's reads cost one round trip to the server, however
// many meters it asks for: they are pipelined. A proxy between hookledger
// and the server counts the turns (the client writing after the server
// has answered).
func TestCheckReadsOneRoundTripOnPostgres(t *testing.T) {
	ctx := context.Background()
	target := freshPostgres(t)
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	migrated, err := Open(ctx, target, Options{})
	if err != nil {
		t.Fatal(err)
	}
	migrated.Close()
	p := newTurnProxy(t, u.Host)
	u.Host = p.addr
	db, err := Open(ctx, u.String(), Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	meters := []string{"a", "b", "c", "d"}
	for range 2 { // the first prepares the statements on the connection
		if _, err := db.CheckReads(ctx, "cus_a", meters, true, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := db.CheckReads(ctx, "cus_a", meters, false, 1); err != nil {
			t.Fatal(err)
		}
	}
	for _, spend := range []bool{false, true} {
		before := p.count()
		if _, err := db.CheckReads(ctx, "cus_a", meters, spend, 1); err != nil {
			t.Fatal(err)
		}
		if n := p.count() - before; n != 1 {
			t.Errorf("spend %v: a check cost %d round trips, want 1", spend, n)
		}
	}
}

// turnProxy forwards TCP connections to a server and counts, over all of
// them, the client's writes that follow an answer from the server.
type turnProxy struct {
	addr  string
	mu    sync.Mutex
	turns int
}

func newTurnProxy(t *testing.T, server string) *turnProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	p := &turnProxy{addr: l.Addr().String()}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", server)
			if err != nil {
				c.Close()
				continue
			}
			answered := true // the client speaks first
			relay := func(dst, src net.Conn, fromClient bool) {
				defer dst.Close()
				defer src.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := src.Read(buf)
					if n > 0 {
						p.mu.Lock()
						if fromClient && answered {
							p.turns++
						}
						answered = !fromClient
						p.mu.Unlock()
						if _, err := dst.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}
			go relay(s, c, true)
			go relay(c, s, false)
		}
	}()
	return p
}

func (p *turnProxy) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.turns
}

// A database older than spend limits (opened read-only, so not migrated:
// `limits --customer` on a database an older serve left) has no spend
// overrides: a check with spend still answers, from the usage state.
// Older than the usage state, nothing is built.
func TestCheckReadsOnOlderDatabases(t *testing.T) {
	ctx := context.Background()
	path, old := openAt(t, versionSpend-1)
	old.MustExec(`INSERT INTO usage_state_zone (one, zone, built_at, through) VALUES (1, 'UTC', 5, 7)`)
	old.MustExec(`INSERT INTO usage_state (` + usageStateCols + `) VALUES ('cus_a', 'calls', 0, 100, '3', 9)`)
	db, err := Open(ctx, path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r, err := db.CheckReads(ctx, "cus_a", []string{"calls"}, true, 50)
	if err != nil || !r.Built || len(r.States) != 1 || r.States[0].Used != "3" || r.SpendOverrides != nil {
		t.Fatalf("before spend limits: %+v, %v; want the built state without spend overrides", r, err)
	}

	path, _ = openAt(t, versionEntitlements-1)
	db2, err := Open(ctx, path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if r, err := db2.CheckReads(ctx, "cus_a", []string{"calls"}, true, 50); err != nil || r.Built {
		t.Fatalf("before the usage state: %+v, %v; want not built", r, err)
	}
}
