package payload

import (
	"os"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// The cost of reading a body on the hot path, against the gjson calls it replaced:
//
//	go test -run '^$' -bench . -benchmem ./payload/

func stripeBody(tb testing.TB) []byte {
	tb.Helper()
	b, err := os.ReadFile("testdata/stripe_invoice_paid.json")
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// bigBody is a 256 KiB (the default max_body) Stripe-shaped event: an invoice with many lines.
func bigBody() []byte {
	const line = `{"id":"il_1PqXyY2eZvKYlo2C3mN8pQ1r","object":"line_item","amount":12500,"currency":"usd","description":"1250 × API requests (at $0.10 / request)","metadata":{"meter":"api_requests","quantity":"1250"},"period":{"end":1764417600,"start":1761825600},"proration":false,"quantity":1250,"type":"subscription"}`
	var sb strings.Builder
	sb.WriteString(`{"id":"evt_1","object":"event","type":"invoice.paid","data":{"object":{"customer":"cus_1","lines":{"data":[` + line)
	for sb.Len() < 256<<10-len(line)-16 {
		sb.WriteString("," + line)
	}
	sb.WriteString(`]}}}}`)
	return []byte(sb.String())
}

func benchBodies(b *testing.B) []struct {
	name string
	body []byte
} {
	return []struct {
		name string
		body []byte
	}{{"stripe-2KB", stripeBody(b)}, {"256KiB", bigBody()}}
}

func BenchmarkCheck(b *testing.B) {
	for _, c := range benchBodies(b) {
		b.Run("gjson.ValidBytes/"+c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				if !gjson.ValidBytes(c.body) {
					b.Fatal("invalid")
				}
			}
		})
		b.Run("Check/"+c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				if Check(c.body, 128) != nil {
					b.Fatal("invalid")
				}
			}
		})
	}
}

// benchPaths are what a Stripe provider with a usage mapping reads: the event id and type
// (Identify), then customer, quantity and time (the mapping).
var benchPaths = []string{"id", "type", "data.object.customer", "data.object.lines.data.0.quantity", "data.object.period_end"}

func BenchmarkGet(b *testing.B) {
	for _, c := range benchBodies(b) {
		b.Run("gjson.GetBytes/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, p := range benchPaths {
					gjson.GetBytes(c.body, p)
				}
			}
		})
		b.Run("Get/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, p := range benchPaths {
					Get(c.body, p)
				}
			}
		})
	}
}
