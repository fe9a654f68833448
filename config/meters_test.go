package config

import (
	"slices"
	"strings"
	"testing"

	"github.com/hookledger/hookledger/ledger"
)

const meterProvider = "providers:\n  - name: a\n    scheme: github\n    secrets: [x]\n"

func TestMetersParse(t *testing.T) {
	c, err := Parse([]byte(meterProvider+`meters:
  - name: api
  - name: users
    aggregation: unique_count
    property: user
    unit: users
  - name: seats
    aggregation: max
    properties: [plan]
usage:
  - type: t
    customer: c
    meter: {value: users}
    quantity: q
    properties:
      user: data.user
`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ms := ledger.NewMeters(c.Meters)
	if ms.Get("api").Aggregation != ledger.AggSum {
		t.Errorf("default aggregation: %+v", ms.Get("api"))
	}
	if u := ms.Get("users"); u.Property != "user" || u.Unit != "users" || len(u.Properties) != 1 || u.Properties[0] != "user" {
		t.Errorf("unique_count meter keeps its property: %+v", u)
	}
	if s := ms.Get("seats"); s.Aggregation != ledger.AggMax || s.Properties[0] != "plan" {
		t.Errorf("seats: %+v", s)
	}
}

func TestMeterDimensionsAreKeptProperties(t *testing.T) {
	c, err := Parse([]byte(meterProvider+`meters:
  - name: tokens
    dimensions: [model, region]
usage:
  - type: t
    customer: c
    meter: {value: tokens}
    quantity: q
    properties: {model: data.model, region: data.region}
`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m := ledger.NewMeters(c.Meters).Get("tokens")
	if !slices.Equal(m.Dimensions, []string{"model", "region"}) || !slices.Equal(m.Properties, []string{"model", "region"}) {
		t.Fatalf("tokens: %+v", m)
	}
}

func TestMeterErrorsNameLineAndKey(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		want       []string
	}{
		{"no name", "meters:\n  - unit: x\n", []string{"6:", "meters[0].name", "required"}},
		{"twice", "meters:\n  - name: a\n  - name: a\n", []string{"7:", "meters[1].name", "twice"}},
		{"bad aggregation", "meters:\n  - name: a\n    aggregation: median\n", []string{"7:", "meters[0].aggregation", "unique_count"}},
		{"unique_count without property", "meters:\n  - name: a\n    aggregation: unique_count\n", []string{"meters[0].property", "distinct"}},
		{"property on sum", "meters:\n  - name: a\n    property: u\n", []string{"7:", "meters[0].property"}},
		{"property listed twice", "meters:\n  - name: a\n    properties: [p, p]\n", []string{"meters[0].properties[1]", "twice"}},
		{"mapping lacks a kept property", "meters:\n  - name: users\n    aggregation: unique_count\n    property: user\nusage:\n  - type: t\n    customer: c\n    meter: {value: users}\n    quantity: q\n",
			[]string{"usage[0].properties", `keeps property "user"`}},
		{"dimension listed twice", "meters:\n  - name: a\n    dimensions: [model, model]\n", []string{"meters[0].dimensions[1]", "twice"}},
		{"dimension named like a grouping", "meters:\n  - name: a\n    dimensions: [day]\n", []string{"meters[0].dimensions[0]", "built-in"}},
		{"dimension name with a comma", "meters:\n  - name: a\n    dimensions: [\"a,b\"]\n", []string{"meters[0].dimensions[0]", "letters"}},
		{"mapping lacks a dimension", "meters:\n  - name: tokens\n    dimensions: [model, region]\nusage:\n  - type: t\n    customer: c\n    meter: {value: tokens}\n    quantity: q\n    properties: {model: m}\n",
			[]string{"usage[0].properties", `keeps property "region"`, "properties.region"}},
		{"meter from a path lacks a dimension", "meters:\n  - name: api\n  - name: tokens\n    dimensions: [model]\nusage:\n  - type: t\n    customer: c\n    meter: data.meter\n    quantity: q\n",
			[]string{"usage[0].properties", `may be "tokens"`, `dimension "model"`, "properties.model"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(meterProvider+c.yaml), t.TempDir())
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
