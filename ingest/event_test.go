package ingest

import (
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
