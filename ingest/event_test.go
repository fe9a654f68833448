package ingest

import (
	"bytes"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestEventIDIsInjective(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		alpha := rapid.SampledFrom([]rune{'a', '#', '%', '2', '3', '5'})
		s1 := string(rapid.SliceOf(alpha).Draw(t, "s1"))
		i1 := string(rapid.SliceOf(alpha).Draw(t, "i1"))
		s2 := string(rapid.SliceOf(alpha).Draw(t, "s2"))
		i2 := string(rapid.SliceOf(alpha).Draw(t, "i2"))
		if (s1 != s2 || i1 != i2) && EventID(s1, i1) == EventID(s2, i2) {
			t.Fatalf("(%q, %q) and (%q, %q) both give %q", s1, i1, s2, i2, EventID(s1, i1))
		}
		if s, i, ok := SplitEventID(EventID(s1, i1)); !ok || s != s1 || i != i1 {
			t.Fatalf("split(%q) = %q %q %v", EventID(s1, i1), s, i, ok)
		}
	})
}

func TestParseBearer(t *testing.T) {
	for h, want := range map[string]error{
		"":                 ErrNoKey,
		"Basic abc":        ErrBadKey,
		"Bearer whsec_abc": ErrBadKey,
		"Bearer":           ErrBadKey,
		"Bearer hl_x":      ErrBadKey, // too short
		"Bearer hl_" + strings.Repeat("a", 42) + "!": ErrBadKey,
		"bearer hl_" + strings.Repeat("a", 43):       nil,
		"Bearer  hl_" + strings.Repeat("-", 43):      nil,
	} {
		if _, err := ParseBearer(h); err != want {
			t.Errorf("%q: %v, want %v", h, err, want)
		}
	}
}

func TestShapeOf(t *testing.T) {
	for ct, want := range map[string]Shape{
		"application/cloudevents+json; charset=utf-8": CloudEvent,
		"application/cloudevents-batch+json":          CloudEventBatch,
		"application/json":                            Generic,
		"text/plain":                                  0,
		"":                                            0,
	} {
		if got, _ := ShapeOf(ct); got != want {
			t.Errorf("%q: %v, want %v", ct, got, want)
		}
	}
}

func TestParseDuplicateKeysLastWins(t *testing.T) {
	evs, err := Parse([]byte(`[{"id":"a","id":"b","type":"t","source":"s"}]`), Generic, 0, 10, "k")
	if err != nil || len(evs) != 1 || evs[0].ID != "b" || evs[0].EventID() != "s#b" {
		t.Fatalf("%+v %v", evs, err)
	}
}

// A structured event's bytes are the object, as a batch element's are: the
// whitespace around it is not stored, so a retry sent from a file (with its
// last newline) is the same event, not a payload mismatch.
func TestStructuredEventIsTheObjectWithoutSurroundingSpace(t *testing.T) {
	const event = `{"specversion":"1.0","id":"e1","source":"app","type":"t","data":{"n":1}}`
	batch, err := Parse([]byte("[ "+event+" ]"), CloudEventBatch, 0, 10, "k")
	if err != nil || len(batch) != 1 {
		t.Fatalf("batch: %+v %v", batch, err)
	}
	for _, body := range []string{event, event + "\n", " \t\r\n" + event + "\r\n"} {
		evs, err := Parse([]byte(body), CloudEvent, 0, 10, "k")
		if err != nil || len(evs) != 1 || string(evs[0].Raw) != event || !bytes.Equal(evs[0].Raw, batch[0].Raw) {
			t.Errorf("%q: %+v %v, want the object's bytes", body, evs, err)
		}
	}
}
