package ledger_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/ledger"
)

func TestUsagePeriodIsHalfOpen(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	from, to := ts("2026-11-01T00:00:00Z"), ts("2026-12-01T00:00:00Z")
	e.Write(
		row{Customer: "c1", Meter: "api", Qty: q("1"), At: from.Add(-time.Millisecond)}, // before: excluded
		row{Customer: "c1", Meter: "api", Qty: q("10"), At: from},                       // exactly at from: included
		row{Customer: "c1", Meter: "api", Qty: q("100"), At: to.Add(-time.Millisecond)}, // last instant: included
		row{Customer: "c1", Meter: "api", Qty: q("1000"), At: to},                       // exactly at to: excluded
	)
	rep := e.Query(ledger.UsageQuery{From: from, To: to})
	if len(rep.Lines) != 1 || !rep.Lines[0].Quantity.Equal(q("110")) || rep.Lines[0].Events != 2 {
		t.Fatalf("got %+v, want one line of 110 from 2 events", rep.Lines)
	}
	// The next window starts exactly where this one ended: nothing is lost or doubled.
	next := e.Query(ledger.UsageQuery{From: to, To: to.AddDate(0, 1, 0)})
	if len(next.Lines) != 1 || !next.Lines[0].Quantity.Equal(q("1000")) {
		t.Fatalf("next window: got %+v, want 1000", next.Lines)
	}
}

func TestUsageDSTDayHasHourlyBuckets(t *testing.T) {
	berlin := mustZone(t, "Europe/Berlin")
	for _, tc := range []struct {
		day   string
		hours int
	}{
		{"2026-03-29", 23}, // clocks jump from 02:00 to 03:00
		{"2026-10-25", 25}, // 02:00-03:00 happens twice
		{"2026-06-01", 24},
	} {
		t.Run(tc.day, func(t *testing.T) {
			e := newEnv(t)
			defer e.Close()
			p := ledger.UsageParams{From: tc.day, To: tc.day + "T23:59:59.999", TZ: "Europe/Berlin", GroupBy: "hour"}
			qr, err := p.Query(nil)
			if err != nil {
				t.Fatal(err)
			}
			start, _ := time.ParseInLocation(time.DateOnly, tc.day, berlin)
			end := start.AddDate(0, 0, 1)
			if got := end.Sub(start); got != time.Duration(tc.hours)*time.Hour {
				t.Fatalf("test setup: day is %s long", got)
			}
			// One event every 20 minutes of real time, plus one either side of the day.
			var rows []row
			for at := start.Add(-time.Minute); at.Before(end.Add(time.Minute)); at = at.Add(20 * time.Minute) {
				rows = append(rows, row{Customer: "c", Meter: "api", Qty: q("1"), At: at})
			}
			e.Write(rows...)
			qr.To = end // the whole local day, half-open
			rep := e.Query(qr)
			if len(rep.Lines) != tc.hours {
				t.Fatalf("got %d hourly buckets, want %d: %+v", len(rep.Lines), tc.hours, rep.Lines)
			}
			var total int64
			seen := map[string]bool{}
			for _, l := range rep.Lines {
				total += l.Events
				if seen[l.Period] {
					t.Fatalf("bucket label %s appears twice", l.Period)
				}
				seen[l.Period] = true
				if ps, pe := ts(l.PeriodStart), ts(l.PeriodEnd); pe.Sub(ps) != time.Hour {
					t.Fatalf("bucket %s spans %s", l.Period, pe.Sub(ps))
				}
			}
			if total != int64(tc.hours*3) {
				t.Fatalf("buckets hold %d events, want %d", total, tc.hours*3)
			}
			daily := e.Query(ledger.UsageQuery{From: start, To: end, Zone: berlin, GroupBy: []string{"day"}})
			if len(daily.Lines) != 1 || daily.Lines[0].Period != tc.day || daily.Lines[0].Events != int64(tc.hours*3) {
				t.Fatalf("daily: got %+v", daily.Lines)
			}
		})
	}
}

func TestUsageMonthBoundaryInZone(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	// 23:30 UTC on 31 October is 00:30 on 1 November in Berlin (UTC+1 after DST).
	e.Write(
		row{Customer: "c", Meter: "api", Qty: q("5"), At: ts("2026-10-31T23:30:00Z")},
		row{Customer: "c", Meter: "api", Qty: q("7"), At: ts("2026-10-31T22:59:59.999Z")}, // 23:59:59.999 Berlin: October
	)
	for _, tc := range []struct {
		tz   string
		want map[string]string
	}{
		{"UTC", map[string]string{"2026-10": "12"}},
		{"Europe/Berlin", map[string]string{"2026-10": "7", "2026-11": "5"}},
		{"America/New_York", map[string]string{"2026-10": "12"}},
	} {
		qr, err := ledger.UsageParams{TZ: tc.tz, GroupBy: "customer,month"}.Query(nil)
		if err != nil {
			t.Fatal(err)
		}
		rep := e.Query(qr)
		got := map[string]string{}
		for _, l := range rep.Lines {
			got[l.Period] = l.Quantity.String()
		}
		if len(got) != len(tc.want) {
			t.Fatalf("%s: got %v, want %v", tc.tz, got, tc.want)
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Fatalf("%s: got %v, want %v", tc.tz, got, tc.want)
			}
		}
	}
	// --from as a month in the zone starts at local midnight.
	qr, err := ledger.UsageParams{From: "2026-11", To: "2026-12", TZ: "Europe/Berlin"}.Query(nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := ts("2026-10-31T23:00:00Z"); !qr.From.Equal(want) {
		t.Fatalf("from = %s, want %s", qr.From, want)
	}
	if rep := e.Query(qr); len(rep.Lines) != 1 || !rep.Lines[0].Quantity.Equal(q("5")) {
		t.Fatalf("November in Berlin: got %+v, want 5", rep.Lines)
	}
}

func TestUsageAsOf(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	e.SetClock(ts("2026-12-01T10:00:00Z"))
	e.Write(row{Customer: "c", Meter: "api", Qty: q("3"), At: ts("2026-11-05T00:00:00Z")})
	e.SetClock(ts("2026-12-02T10:00:00Z"))
	e.Write(row{Customer: "c", Meter: "api", Qty: q("4"), At: ts("2026-11-06T00:00:00Z")})
	for _, tc := range []struct {
		asOf string
		want string
	}{
		{"", "7"},
		{"2026-12-02T10:00:00Z", "3"}, // recorded_at < as-of: the second batch is excluded
		{"2026-12-02T10:00:00.001Z", "7"},
		{"2026-12-01", "0"},
		{"id:1", "3"},
		{"id:2", "7"},
	} {
		qr, err := ledger.UsageParams{AsOf: tc.asOf}.Query(nil)
		if err != nil {
			t.Fatal(err)
		}
		rep := e.Query(qr)
		got := "0"
		if len(rep.Lines) == 1 {
			got = rep.Lines[0].Quantity.String()
		}
		if got != tc.want {
			t.Errorf("as-of %q: got %s, want %s", tc.asOf, got, tc.want)
		}
	}
}

func TestUsageGroupWithoutMeterNeedsOneAggregation(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	meters := ledger.NewMeters([]ledger.Meter{
		{Name: "api", Aggregation: ledger.AggSum},
		{Name: "seats", Aggregation: ledger.AggMax},
	})
	e.Write(
		row{Customer: "a", Meter: "api", Qty: q("2"), At: ts("2026-11-01T00:00:00Z")},
		row{Customer: "a", Meter: "seats", Qty: q("9"), At: ts("2026-11-01T00:00:00Z")},
		row{Customer: "b", Meter: "seats", Qty: q("4"), At: ts("2026-11-01T00:00:00Z")},
	)
	_, err := ledger.Query(e.Ctx, e.DB, ledger.UsageQuery{GroupBy: []string{"customer"}, Meters: meters})
	if err == nil || !strings.Contains(err.Error(), "aggregate differently") {
		t.Fatalf("mixing sum and max in one group: err = %v", err)
	}
	rep := e.Query(ledger.UsageQuery{GroupBy: []string{}, Meter: "seats", Meters: meters})
	if len(rep.Lines) != 1 || !rep.Lines[0].Quantity.Equal(q("9")) || rep.Lines[0].Aggregation != ledger.AggMax {
		t.Fatalf("max over all customers: got %+v", rep.Lines)
	}
}

func TestUsageParamsErrors(t *testing.T) {
	for _, tc := range []struct {
		p    ledger.UsageParams
		want string
	}{
		{ledger.UsageParams{TZ: "Mars/Olympus"}, "tz:"},
		{ledger.UsageParams{TZ: "Local"}, "tz:"},
		{ledger.UsageParams{From: "yesterday"}, "from:"},
		{ledger.UsageParams{To: "2026-13-01"}, "to:"},
		{ledger.UsageParams{From: "2026-11-02", To: "2026-11-01"}, "from: must be before to"},
		{ledger.UsageParams{From: "2026-11-01", To: "2026-11-01"}, "from: must be before to"},
		{ledger.UsageParams{GroupBy: "customer,week"}, "group-by:"},
		{ledger.UsageParams{GroupBy: "day,month"}, "pick one time bucket"},
		{ledger.UsageParams{GroupBy: "meter,meter"}, "listed twice"},
		{ledger.UsageParams{AsOf: "id:x"}, "as-of:"},
		{ledger.UsageParams{AsOf: "soon"}, "as-of:"},
	} {
		_, err := tc.p.Query(nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.p, err, tc.want)
		}
	}
}

func TestMeterNormalize(t *testing.T) {
	for _, tc := range []struct {
		m    ledger.Meter
		want string
	}{
		{ledger.Meter{}, "name: required"},
		{ledger.Meter{Name: "x", Aggregation: "median"}, "aggregation:"},
		{ledger.Meter{Name: "x", Aggregation: "unique_count"}, "property:"},
		{ledger.Meter{Name: "x", Aggregation: "sum", Property: "u"}, "property:"},
		{ledger.Meter{Name: "x", Properties: []string{"a", "a"}}, "listed twice"},
		{ledger.Meter{Name: "x", Properties: []string{" a"}}, "not a property name"},
	} {
		m := tc.m
		if err := m.Normalize(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.m, err, tc.want)
		}
	}
	m := ledger.Meter{Name: "users", Aggregation: "unique_count", Property: "user"}
	if err := m.Normalize(); err != nil || len(m.Properties) != 1 || m.Properties[0] != "user" {
		t.Fatalf("unique_count keeps its property: %+v, %v", m, err)
	}
	s := ledger.Meter{Name: "api"}
	if err := s.Normalize(); err != nil || s.Aggregation != ledger.AggSum {
		t.Fatalf("default aggregation: %+v, %v", s, err)
	}
}
