package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/hookledger/hookledger/payload"
)

// Field is where a usage attribute comes from: a JSON path into the event body
// (payload.Get: plain gjson keys, the last of duplicate keys winning) or a constant. In YAML a plain string is a path, a number is a
// constant, and {value: X} or {path: P} says which explicitly.
type Field struct {
	Path  string `yaml:"path"`
	Value string `yaml:"value"`
	// bad holds a decoding problem for Validate to report with its position:
	// the YAML library cannot position errors raised inside custom decoders.
	bad string
}

// IsZero reports whether the field was not configured.
func (f Field) IsZero() bool { return f.Path == "" && f.Value == "" }

// UnmarshalYAML accepts the shorthand forms described on Field.
func (f *Field) UnmarshalYAML(unmarshal func(any) error) error {
	var scalar any
	if err := unmarshal(&scalar); err != nil {
		return err
	}
	*f = Field{}
	switch v := scalar.(type) {
	case string:
		f.Path = v
	case int, int64, uint64, float64:
		f.Value = fmt.Sprint(v)
	case map[string]any:
		for k, x := range v {
			switch k {
			case "path":
				f.Path = fmt.Sprint(x)
			case "value":
				f.Value = fmt.Sprint(x)
			default:
				f.bad = fmt.Sprintf("unknown key %q (want path or value)", k)
			}
		}
		if f.bad == "" && (f.Path == "") == (f.Value == "") {
			f.bad = "set exactly one of path or value"
		}
	default:
		f.bad = fmt.Sprintf("want a JSON path, a number or {value: ...}, got %T", scalar)
	}
	return nil
}

// Validate rejects paths that would silently never match, or not as meant.
func (f Field) Validate() error {
	if f.bad != "" {
		return errors.New(f.bad)
	}
	if f.Path == "" {
		if err := CheckText(f.Value); err != nil {
			return fmt.Errorf("value %w", err)
		}
		return nil
	}
	return payload.CheckPath(f.Path)
}

// Mapping turns one event type into one usage row. Several mappings may match
// the same event; each yields a row, and their meters must differ.
type Mapping struct {
	Provider   string           `yaml:"provider"` // empty: any provider
	Type       string           `yaml:"type"`     // the event type to match
	Customer   Field            `yaml:"customer"`
	Meter      Field            `yaml:"meter"`
	Quantity   Field            `yaml:"quantity"`
	OccurredAt Field            `yaml:"occurred_at"` // optional: RFC 3339 or unix seconds; default receipt time
	Properties map[string]Field `yaml:"properties"`  // optional: kept on the row for aggregations
	// MaxFuture and MaxPast bound the event time around the time the event
	// was received (see Bound); config fills in their defaults. They are
	// left out of the JSON the mapping version is computed from (NewMapper
	// adds them only when configured), so a configuration that does not
	// set them keeps the version its receipts already record.
	MaxFuture Bound `yaml:"max_future" json:"-"`
	MaxPast   Bound `yaml:"max_past" json:"-"`

	window window // set by NewMapper
}

// Validate checks a mapping on its own; the error names the offending key.
func (m Mapping) Validate() error {
	if m.Type == "" {
		return errors.New("type: required (the event type this mapping matches)")
	}
	for _, f := range []struct {
		key      string
		field    Field
		required bool
	}{
		{"customer", m.Customer, true},
		{"meter", m.Meter, true},
		{"quantity", m.Quantity, true},
		{"occurred_at", m.OccurredAt, false},
	} {
		if f.required && f.field.IsZero() && f.field.bad == "" {
			return fmt.Errorf("%s: required", f.key)
		}
		if err := f.field.Validate(); err != nil {
			return fmt.Errorf("%s: %w", f.key, err)
		}
	}
	if m.Quantity.Value != "" {
		if _, err := ParseRowQuantity(m.Quantity.Value); err != nil {
			return fmt.Errorf("quantity: %w", err)
		}
	}
	for k, f := range m.Properties {
		if err := f.Validate(); err != nil {
			return fmt.Errorf("properties.%s: %w", k, err)
		}
	}
	return nil
}

// UsageRow is what a mapping extracts from one event.
type UsageRow struct {
	Customer   string
	Meter      string
	Quantity   Total // at most what one row holds (RowParts)
	OccurredAt time.Time
	Properties string // canonical JSON object
}

// Mapper applies the configured mappings to authenticated events.
type Mapper struct {
	version string
	byType  map[string][]Mapping // key: event type
	meters  map[string]bool      // nil: any meter is accepted
}

// NewMapper builds a mapper. If meters is non-empty, mapped meters must be among them.
func NewMapper(mappings []Mapping, meters []string) *Mapper {
	var windows []string
	for i, mp := range mappings {
		if mp.MaxFuture.Text != "" || mp.MaxPast.Text != "" {
			windows = append(windows, fmt.Sprintf("%d:%s/%s:%s/%s", i, mp.MaxFuture.Text, mp.MaxFuture.Max, mp.MaxPast.Text, mp.MaxPast.Max))
		}
	}
	fp, _ := json.Marshal(struct {
		M []Mapping
		N []string
		W []string `json:",omitempty"`
	}{mappings, meters, windows})
	sum := sha256.Sum256(fp)
	m := &Mapper{byType: make(map[string][]Mapping), version: "map-" + hex.EncodeToString(sum[:4])}
	for i, mp := range mappings {
		mp.window = window{future: mp.MaxFuture.Max, past: mp.MaxPast.Max, at: fmt.Sprintf("usage[%d]", i)}
		m.byType[mp.Type] = append(m.byType[mp.Type], mp)
	}
	if len(meters) > 0 {
		m.meters = make(map[string]bool, len(meters))
		for _, name := range meters {
			m.meters[name] = true
		}
	}
	return m
}

// Version identifies the mapping configuration; receipts record it so a
// disputed charge shows which rules produced it.
func (m *Mapper) Version() string { return m.version }

// Map returns the usage rows for an event. matched is false when no mapping
// covers the event type (the receipt is "ignored"); a non-nil error means a
// mapping matched but the payload does not fit it (the receipt is "failed").
func (m *Mapper) Map(provider, eventType string, body []byte, receivedAt time.Time) (rows []UsageRow, matched bool, err error) {
	return m.MapWith(provider, eventType, body, Defaults{OccurredAt: receivedAt})
}

// MapWith is Map with the values used where a mapping's path finds nothing
// (def: see Defaults).
func (m *Mapper) MapWith(provider, eventType string, body []byte, def Defaults) (rows []UsageRow, matched bool, err error) {
	if eventType == ConsumeType && strings.HasPrefix(provider, APIScopePrefix) {
		row, err := m.consumeRow(body) // built in: hookledger wrote the body (consume.go)
		if err != nil {
			return nil, true, err
		}
		return []UsageRow{row}, true, nil
	}
	for _, mp := range m.byType[eventType] {
		if mp.Provider != "" && mp.Provider != provider {
			continue
		}
		matched = true
		row, err := m.row(mp, body, def)
		if err != nil {
			return nil, true, err
		}
		for _, r := range rows {
			if r.Meter == row.Meter {
				return nil, true, fmt.Errorf("two mappings for %q produce meter %q", eventType, row.Meter)
			}
		}
		rows = append(rows, row)
	}
	return rows, matched, nil
}

func (m *Mapper) row(mp Mapping, body []byte, def Defaults) (UsageRow, error) {
	var r UsageRow
	var err error
	if _, ok := lookup(mp.Customer, body); !ok && def.Customer != "" {
		r.Customer = def.Customer
	} else if r.Customer, err = text(mp.Customer, body, "customer"); err != nil {
		return r, err
	}
	if r.Meter, err = text(mp.Meter, body, "meter"); err != nil {
		return r, err
	}
	if m.meters != nil && !m.meters[r.Meter] {
		return r, fmt.Errorf("meter %q is not configured", r.Meter)
	}
	if r.Quantity, err = quantity(mp.Quantity, body); err != nil {
		return r, err
	}
	if r.OccurredAt, err = occurredAt(mp.OccurredAt, body, def.OccurredAt); err != nil {
		return r, err
	}
	if err = mp.window.check(r.OccurredAt, def.received()); err != nil {
		return r, err
	}
	r.Properties, err = properties(mp.Properties, body)
	return r, err
}

func lookup(f Field, body []byte) (gjson.Result, bool) {
	if f.Value != "" {
		return gjson.Result{Type: gjson.String, Str: f.Value, Raw: f.Value}, true
	}
	v := payload.Get(body, f.Path)
	return v, v.Exists() && v.Type != gjson.Null
}

func text(f Field, body []byte, name string) (string, error) {
	v, ok := lookup(f, body)
	if !ok {
		return "", fmt.Errorf("%s: %s is missing", name, f.Path)
	}
	switch v.Type {
	case gjson.String:
		if v.Str == "" {
			return "", fmt.Errorf("%s: %s is empty", name, f.Path)
		}
		if err := CheckIdentifier(v.Str); err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		return v.Str, nil
	case gjson.Number:
		if err := CheckIdentifier(v.Raw); err != nil { // only its length can fail
			return "", fmt.Errorf("%s: %w", name, err)
		}
		return v.Raw, nil
	}
	return "", fmt.Errorf("%s: %s must be a string, got %s", name, f.Path, v.Type)
}

func quantity(f Field, body []byte) (Total, error) {
	v, ok := lookup(f, body)
	if !ok {
		return Total{}, fmt.Errorf("quantity: %s is missing", f.Path)
	}
	var s string
	switch v.Type {
	case gjson.Number:
		s = v.Raw
	case gjson.String:
		s = v.Str
	default:
		return Total{}, fmt.Errorf("quantity: %s must be a number, got %s", f.Path, v.Type)
	}
	q, err := ParseRowQuantity(s)
	if err != nil {
		return Total{}, fmt.Errorf("quantity: %w", err)
	}
	if q.Sign() < 0 {
		return Total{}, fmt.Errorf("quantity: %s is negative (%s); corrections are adjustments", f.Path, q)
	}
	return q, nil
}

// clip shortens a value quoted in an error to its first 64 bytes (on a
// character boundary) and its length: the error is stored with the receipt,
// answered and logged, and the sender chose the value's size.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
}

// maxUnixSeconds is 9999-12-31T23:59:59Z, the last second RFC 3339 (and so
// every report, export and JSON answer) can write: a unix time past it is
// almost always milliseconds sent as seconds.
const maxUnixSeconds = 253402300799

func occurredAt(f Field, body []byte, receivedAt time.Time) (time.Time, error) {
	if f.IsZero() {
		return receivedAt, nil
	}
	v, ok := lookup(f, body)
	if !ok {
		return receivedAt, nil
	}
	switch v.Type {
	case gjson.String:
		t, err := time.Parse(time.RFC3339Nano, v.Str)
		if err != nil {
			return time.Time{}, fmt.Errorf("occurred_at: %q is not an RFC 3339 time", clip(v.Str))
		}
		return t.UTC(), nil
	case gjson.Number:
		secs := v.Float()
		if secs < 0 {
			return time.Time{}, fmt.Errorf("occurred_at: %s is not a unix time in seconds", clip(v.Raw))
		}
		if secs > maxUnixSeconds {
			return time.Time{}, fmt.Errorf("occurred_at: %s is after the year 9999 as unix seconds (milliseconds, perhaps?)", clip(v.Raw))
		}
		return time.UnixMilli(int64(secs * 1000)).UTC(), nil
	}
	return time.Time{}, fmt.Errorf("occurred_at: must be an RFC 3339 string or unix seconds, got %s", v.Type)
}

// properties renders the configured properties as a JSON object with sorted
// keys, so the same event always yields the same bytes (they are hashed).
// A value is kept as the payload wrote it (its JSON text), so each one must
// be text every backend stores (checkJSONText): a byte that is not UTF-8
// fails the mapping like a customer id that is not clean text, instead of
// aborting PostgreSQL's transaction (a 503 for every retry) or landing in a
// SQLite file that copy cannot move.
func properties(fields map[string]Field, body []byte) (string, error) {
	if len(fields) == 0 {
		return "{}", nil
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		v, ok := lookup(fields[k], body)
		raw := "null"
		if ok {
			raw = v.Raw
			if fields[k].Value != "" {
				raw = jsonString(v.Str)
			} else if err := checkJSONText(v); err != nil {
				return "", fmt.Errorf("properties.%s: %w", k, err)
			}
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(jsonString(k))
		b.WriteByte(':')
		b.WriteString(raw)
	}
	b.WriteByte('}')
	return b.String(), nil
}

// checkJSONText refuses a JSON value holding text that no backend can store
// as text (CheckText): in its JSON text (a byte that is not UTF-8, kept as
// written) or in any string or object key it decodes to (an escaped NUL,
// "\u0000", which dimensions, reports and exports would hand on decoded).
func checkJSONText(v gjson.Result) error {
	if err := CheckText(v.Raw); err != nil {
		return err
	}
	var err error
	var walk func(k, v gjson.Result) bool
	walk = func(k, v gjson.Result) bool {
		if err == nil && k.Type == gjson.String {
			err = CheckText(k.Str)
		}
		switch {
		case err != nil:
		case v.Type == gjson.String:
			err = CheckText(v.Str)
		case v.IsObject(), v.IsArray():
			v.ForEach(walk)
		}
		return err == nil
	}
	walk(gjson.Result{}, v)
	return err
}
