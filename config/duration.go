package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Duration is a YAML duration: Go syntax ("300s", "5m", "72h") plus whole
// days ("30d"), since retention windows are naturally stated in days and
// time.ParseDuration has no day unit.
//
// Decoding never fails: a bad value is kept and reported by Check, so the
// error can name the key and line (the YAML library does not position errors
// raised inside custom decoders).
type Duration struct {
	time.Duration
	bad string
}

// UnmarshalYAML records the value or what was wrong with it.
func (d *Duration) UnmarshalYAML(unmarshal func(any) error) error {
	var s string
	if err := unmarshal(&s); err != nil {
		d.bad = "want a duration such as 300s, 5m, 72h or 30d"
		return nil
	}
	v, err := ParseDuration(s)
	if err != nil {
		d.bad = err.Error()
		return nil
	}
	d.Duration = v
	return nil
}

// Check reports a value that did not parse, or a negative one.
func (d Duration) Check() error {
	if d.bad != "" {
		return fmt.Errorf("%s", d.bad)
	}
	if d.Duration < 0 {
		return fmt.Errorf("must not be negative")
	}
	return nil
}

// ParseDuration accepts time.ParseDuration syntax and a whole number of days ("30d").
func ParseDuration(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > 36500 {
			return 0, fmt.Errorf("invalid duration %q (days must be a whole number, e.g. 30d)", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q (use e.g. 300s, 5m, 72h or 30d)", s)
	}
	return v, nil
}
