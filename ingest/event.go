package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"mime"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/payload"
)

// Shape is one of the accepted bodies, chosen by Content-Type.
type Shape int

// Accepted shapes.
const (
	// CloudEvent is one CloudEvents 1.0 event in structured mode
	// (application/cloudevents+json).
	CloudEvent Shape = iota + 1
	// CloudEventBatch is a JSON array of CloudEvents
	// (application/cloudevents-batch+json).
	CloudEventBatch
	// Generic is a JSON array of generic usage events (application/json):
	// {"id", "type", "data", and optionally "source", "subject", "time"}.
	Generic
)

// Media types of the accepted shapes.
const (
	MediaCloudEvent      = "application/cloudevents+json"
	MediaCloudEventBatch = "application/cloudevents-batch+json"
	MediaGeneric         = "application/json"
)

// ErrMediaType is a Content-Type that names none of the accepted shapes (415).
var ErrMediaType = errors.New("Content-Type must be " + MediaCloudEvent + ", " + MediaCloudEventBatch + " or " + MediaGeneric)

// ShapeOf is the shape a Content-Type names.
func ShapeOf(contentType string) (Shape, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return 0, ErrMediaType
	}
	switch mt {
	case MediaCloudEvent:
		return CloudEvent, nil
	case MediaCloudEventBatch:
		return CloudEventBatch, nil
	case MediaGeneric:
		return Generic, nil
	}
	return 0, ErrMediaType
}

// Body errors: the whole request is refused and nothing is written.
var (
	ErrNotJSON  = errors.New("body is not valid JSON")
	ErrTooDeep  = errors.New("body nests too deep")
	ErrNotArray = errors.New("a batch must be a JSON array of events")
	ErrNotEvent = errors.New("a structured CloudEvent must be a JSON object")
	ErrTooMany  = errors.New("too many events")
)

// Rejection reasons: an event of an otherwise good body that is not stored.
const (
	RejectNotObject   = "not_object"
	RejectNoID        = "no_id"
	RejectBadID       = "bad_id"
	RejectNoSource    = "no_source"
	RejectBadSource   = "bad_source"
	RejectNoType      = "no_type"
	RejectSpecVersion = "bad_specversion"
	RejectBadTime     = "bad_time"
	RejectBadSubject  = "bad_subject"
)

// Event is one event of a request: its exact bytes within the body (what is
// stored and hashed), its identity, and why it is rejected, if it is.
type Event struct {
	Raw    []byte
	ID     string
	Source string
	Type   string
	// Reject is a Reject* reason, Detail what the client reads; empty for
	// an accepted event.
	Reject string
	Detail string
}

// EventID is the receipt key of an accepted event (see EventID).
func (e *Event) EventID() string { return EventID(e.Source, e.ID) }

// EventID joins a CloudEvent's source and id into the event_id of its
// receipt, unambiguously: the source with every "%" written "%25" and every
// "#" written "%23", then "#", then the id as it is. The first "#" of the
// result is always the separator, so two different (source, id) pairs never
// give the same event_id, whatever either contains. Together with the scope
// (the provider column) this makes (scope, source, id) the receipt's unique
// key (provider, event_id).
func EventID(source, id string) string {
	return sourceEscaper.Replace(source) + "#" + id
}

// SplitEventID is the inverse of EventID (ok false when s is not one).
func SplitEventID(s string) (source, id string, ok bool) {
	esc, id, ok := strings.Cut(s, "#")
	if !ok {
		return "", "", false
	}
	source = sourceUnescaper.Replace(esc)
	return source, id, EventID(source, id) == s
}

var (
	sourceEscaper   = strings.NewReplacer("%", "%25", "#", "%23")
	sourceUnescaper = strings.NewReplacer("%25", "%", "%23", "#")
)

// Parse splits a body of the given shape into its events, in order. An error
// refuses the whole body (nothing is written); an event that is not usable
// is returned with its Reject reason. defaultSource is the source of a
// generic event that has none (the key's name).
func Parse(body []byte, shape Shape, maxDepth, maxEvents int, defaultSource string) ([]Event, error) {
	switch err := payload.Check(body, maxDepth); {
	case errors.Is(err, payload.ErrTooDeep):
		return nil, fmt.Errorf("%w (more than %d levels)", ErrTooDeep, maxDepth)
	case err != nil:
		return nil, ErrNotJSON
	}
	root := gjson.ParseBytes(body)
	if shape == CloudEvent {
		if !root.IsObject() {
			return nil, ErrNotEvent
		}
		// The event is the object, as in a batch: the whitespace around it
		// (a file's last newline) is not part of its bytes, so curl's -d and
		// --data-binary @file store the same event.
		return []Event{parseEvent(bytes.Trim(body, jsonSpace), true, defaultSource)}, nil
	}
	if !root.IsArray() {
		return nil, ErrNotArray
	}
	var events []Event
	var tooMany bool
	root.ForEach(func(_, v gjson.Result) bool {
		if len(events) == maxEvents {
			tooMany = true
			return false
		}
		events = append(events, parseEvent(raw(body, v), shape == CloudEventBatch, defaultSource))
		return true
	})
	if tooMany {
		return nil, fmt.Errorf("%w: at most %d per request", ErrTooMany, maxEvents)
	}
	return events, nil
}

// jsonSpace is the whitespace JSON allows around a value (RFC 8259).
const jsonSpace = " \t\r\n"

// raw is v's bytes within body, without copying them.
func raw(body []byte, v gjson.Result) []byte {
	if v.Index > 0 || (v.Index == 0 && len(v.Raw) == len(body)) {
		return body[v.Index : v.Index+len(v.Raw)]
	}
	return []byte(v.Raw)
}

// parseEvent reads one event's attributes (the last of duplicate keys wins,
// as payload.Get reads them everywhere).
func parseEvent(b []byte, cloudEvent bool, defaultSource string) Event {
	e := Event{Raw: b}
	reject := func(reason, format string, args ...any) Event {
		e.Reject, e.Detail = reason, fmt.Sprintf(format, args...)
		return e
	}
	if len(b) == 0 || b[0] != '{' {
		return reject(RejectNotObject, "an event must be a JSON object")
	}
	if cloudEvent {
		if v := payload.Get(b, "specversion"); v.Type != gjson.String || v.Str != "1.0" {
			return reject(RejectSpecVersion, "specversion must be \"1.0\"")
		}
	}
	var ok bool
	var reason, detail string
	if e.ID, reason, detail, ok = attribute(b, "id", RejectNoID, RejectBadID); !ok {
		return reject(reason, "%s", detail)
	}
	if e.Source, reason, detail, ok = attribute(b, "source", RejectNoSource, RejectBadSource); !ok {
		if cloudEvent || reason != RejectNoSource {
			return reject(reason, "%s", detail)
		}
		e.Source = defaultSource
	}
	if e.Type, reason, detail, ok = attribute(b, "type", RejectNoType, RejectNoType); !ok {
		return reject(reason, "%s", detail)
	}
	if v := payload.Get(b, "time"); v.Exists() && v.Type != gjson.Null {
		if _, err := time.Parse(time.RFC3339Nano, v.Str); v.Type != gjson.String || err != nil {
			return reject(RejectBadTime, "time must be an RFC 3339 timestamp")
		}
	}
	if v := payload.Get(b, "subject"); v.Exists() && v.Type != gjson.Null {
		if v.Type != gjson.String || v.Str == "" {
			return reject(RejectBadSubject, "subject must be a non-empty string of printable text")
		}
		if err := ledger.CheckIdentifier(v.Str); err != nil {
			return reject(RejectBadSubject, "subject: %v", err)
		}
	}
	if err := ledger.CheckIdentifier(e.EventID()); err != nil {
		return reject(RejectBadID, "id and source: %v", err)
	}
	return e
}

// attribute is a required string attribute: missing (or null or empty) is
// the missing reason, anything else but clean text the bad one.
func attribute(b []byte, name, missing, bad string) (v, reason, detail string, ok bool) {
	r := payload.Get(b, name)
	switch {
	case !r.Exists() || r.Type == gjson.Null || (r.Type == gjson.String && r.Str == ""):
		return "", missing, "the event has no " + name, false
	case r.Type != gjson.String:
		return "", bad, name + " must be a string", false
	}
	if err := ledger.CheckIdentifier(r.Str); err != nil {
		return "", bad, name + ": " + err.Error(), false
	}
	return r.Str, "", "", true
}
