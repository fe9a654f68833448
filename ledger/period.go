package ledger

import (
	"fmt"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // IANA zones work on machines without /usr/share/zoneinfo

	"github.com/hookledger/hookledger/pricing"
)

// LoadZone resolves an IANA time zone name; "" means UTC.
func LoadZone(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	if strings.EqualFold(name, "local") {
		return nil, fmt.Errorf("time zone %q: name an IANA zone such as Europe/Berlin, so the answer does not depend on the machine", name)
	}
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location), nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("time zone %q is not an IANA zone name (e.g. UTC, Europe/Berlin, America/New_York)", name)
	}
	zones.Store(name, loc)
	return loc, nil
}

// zones keeps the zones LoadZone loaded: time.LoadLocation reads and parses
// the zone's file on every call, and the writer asks for the usage state's
// zone in every batch. A *time.Location is immutable, so one is shared.
var zones sync.Map // name → *time.Location

// ParseTime reads a time argument. RFC 3339 with an offset is absolute; a
// month (2026-11), a date (2026-11-01) or a wall-clock time without offset
// (2026-11-01T08:00:00) is read in loc, so "--from 2026-11-01 --tz
// Europe/Berlin" starts at local midnight.
func ParseTime(s string, loc *time.Location) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01", time.DateOnly, "2006-01-02T15:04:05.999999999", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04"} {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time: use RFC 3339 (2026-11-01T00:00:00Z), a date (2026-11-01) or a month (2026-11)", s)
}

// Period is a half-open event-time window [Start, End) with the zone it was
// computed in.
type Period struct {
	Label string // e.g. 2026-11
	Zone  string // IANA name, "UTC" for UTC
	Start time.Time
	End   time.Time
}

// MonthPeriod returns the calendar month "YYYY-MM" in loc.
func MonthPeriod(month string, loc *time.Location) (Period, error) {
	t, err := time.ParseInLocation("2006-01", month, loc)
	if err != nil {
		return Period{}, fmt.Errorf("period %q: want a month as YYYY-MM (e.g. 2026-11)", month)
	}
	return Period{Label: month, Zone: loc.String(), Start: t, End: t.AddDate(0, 1, 0)}, nil
}

// Contains reports whether unix-ms instant ms falls in the period.
func (p Period) Contains(ms int64) bool { return ms >= p.Start.UnixMilli() && ms < p.End.UnixMilli() }

// String is the label with its zone and bounds, for messages.
func (p Period) String() string {
	return fmt.Sprintf("%s (%s, %s to %s)", p.Label, p.Zone, p.Start.Format(time.RFC3339), p.End.Format(time.RFC3339))
}

// Granularity is a time bucket for grouping usage.
type Granularity string

// Bucket sizes for --group-by.
const (
	ByHour  Granularity = "hour"
	ByDay   Granularity = "day"
	ByMonth Granularity = "month"
)

// bucketStart returns the start of the bucket holding instant ms, computed in
// loc. Hours are elapsed hours, so a day with a DST change has 23 or 25 of
// them; days and months follow the local calendar.
func bucketStart(g Granularity, ms int64, loc *time.Location) time.Time {
	t := time.UnixMilli(ms).In(loc)
	switch g {
	case ByHour:
		// Subtract the local minutes and seconds rather than rebuilding the
		// wall clock: the repeated hour of a DST fall-back stays two buckets.
		return t.Add(-time.Duration(t.Minute())*time.Minute - time.Duration(t.Second())*time.Second - time.Duration(t.Nanosecond()))
	case ByDay:
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
	case ByMonth:
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, loc)
	}
	return time.Time{}
}

// bucketEnd returns the end of the bucket that starts at start.
func bucketEnd(g Granularity, start time.Time) time.Time {
	switch g {
	case ByHour:
		return start.Add(time.Hour)
	case ByDay:
		return start.AddDate(0, 0, 1)
	case ByMonth:
		return start.AddDate(0, 1, 0)
	}
	return time.Time{}
}

// bucketLabel names a bucket the way people read it in its zone; hours carry
// the offset so the two 02:00 hours of a fall-back night differ.
func bucketLabel(g Granularity, start time.Time) string {
	switch g {
	case ByHour:
		return start.Format("2006-01-02T15:04Z07:00")
	case ByDay:
		return start.Format(time.DateOnly)
	case ByMonth:
		return start.Format("2006-01")
	}
	return ""
}

// MsTime is a unix millisecond time in the zone tz names (UTC when it names none).
func MsTime(ms int64, tz string) time.Time {
	loc, err := LoadZone(tz)
	if err != nil {
		loc = time.UTC
	}
	return time.UnixMilli(ms).In(loc)
}

// PeriodDay is the first day of a period in its own zone: the day plan
// versions and assignments are compared with.
func PeriodDay(start int64, tz string) pricing.Date {
	return pricing.Date(MsTime(start, tz).Format(time.DateOnly))
}
