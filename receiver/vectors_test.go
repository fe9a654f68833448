package receiver_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/internal/testenv"
)

type vector struct {
	Name      string            `json:"name"`
	Scheme    string            `json:"scheme"`
	Secret    string            `json:"secret"`
	Secrets   []string          `json:"secrets"`
	NowUnix   int64             `json:"now_unix"`
	Tolerance int64             `json:"tolerance_seconds"`
	Headers   map[string]string `json:"headers"`
	BodyB64   string            `json:"body_b64"`
	Valid     bool              `json:"valid"`
	Reason    string            `json:"reason"`
	EventID   string            `json:"event_id"`
}

// The providers' own vectors, posted over HTTP to a receiver on a real
// database with the vector's clock: valid ones are stored under their event
// id, invalid ones get a 4xx and write nothing.
func TestSignatureVectorsEndToEnd(t *testing.T) {
	raw, err := os.ReadFile("../scheme/testdata/signatures.json")
	if err != nil {
		t.Fatal(err)
	}
	var vs []vector
	if err := json.Unmarshal(raw, &vs); err != nil {
		t.Fatal(err)
	}
	if len(vs) != 48 {
		t.Fatalf("%d vectors, want 48", len(vs))
	}
	for _, v := range vs {
		t.Run(v.Name, func(t *testing.T) {
			secrets := v.Secrets
			if len(secrets) == 0 {
				secrets = []string{v.Secret}
			}
			e := newEnv(t, func(c *config.Config) {
				p := config.Provider{Name: "p", Scheme: v.Scheme, Tolerance: config.Duration{Duration: time.Duration(v.Tolerance) * time.Second}, MaxBody: 1 << 20}
				for _, s := range secrets {
					p.Secrets = append(p.Secrets, config.Secret{Value: s})
				}
				c.Providers = []config.Provider{p}
			})
			e.Clock.Set(time.Unix(v.NowUnix, 0))
			body, err := base64.StdEncoding.DecodeString(v.BodyB64)
			if err != nil {
				t.Fatal(err)
			}
			h := http.Header{}
			for k, val := range v.Headers {
				h.Set(k, val)
			}
			r := e.PostReply("p", h, body)
			if v.Valid {
				if r.Code != 200 || r.Body.EventID != v.EventID {
					t.Fatalf("got %d %+v, want 200 for event %q", r.Code, r.Body, v.EventID)
				}
				var n int
				e.DB.Read.Get(&n, `SELECT COUNT(*) FROM receipts WHERE provider = 'p' AND event_id = ? AND body = ?`, v.EventID, body)
				if n != 1 {
					t.Errorf("receipt with the exact body not stored")
				}
				return
			}
			if r.Code/100 != 4 {
				t.Errorf("got %d, want 4xx (%s)", r.Code, v.Reason)
			}
			if got := e.Rows(); got != [3]int{0, 0, 0} {
				t.Errorf("invalid vector wrote %v", got)
			}
		})
	}
}

// Signatures made by stripe-go and the Svix library, not by our own code.
func TestProviderLibrarySignaturesEndToEnd(t *testing.T) {
	const stripeSecret = "whsec_test_9f8e7d6c5b4a"
	e := newEnv(t, func(c *config.Config) {
		c.Providers = append(c.Providers, config.Provider{Name: "stripe", Scheme: "stripe",
			Secrets: []config.Secret{{Value: stripeSecret}}, Tolerance: config.Duration{Duration: 5 * time.Minute}, MaxBody: 1 << 20})
		c.Usage[0].Provider = "default"
		c.Usage = append(c.Usage, c.Usage[0])
		c.Usage[1].Provider = "stripe"
		c.Usage[1].Type = "billing.meter_event"
		c.Usage[1].Customer.Path = "data.object.customer"
		c.Usage[1].Quantity.Path = "data.object.value"
		c.Usage[1].Meter.Path = "data.object.meter"
		c.Usage[1].OccurredAt.Path = "created"
	})
	e.Clock.Set(time.Now()) // stripe-go and svix sign with the real clock

	stripeBody := []byte(`{"id":"evt_lib_1","object":"event","type":"billing.meter_event","created":` +
		strconv.FormatInt(e.Now().Unix(), 10) + `,"data":{"object":{"customer":"cus_s","meter":"tokens","value":"12.5"}}}`)
	sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: stripeBody, Secret: stripeSecret})
	h := http.Header{}
	h.Set("Stripe-Signature", sp.Header)
	if r := e.PostReply("stripe", h, sp.Payload); r.Code != 200 || r.Body.EventID != "evt_lib_1" || r.Body.Status != custody.StatusApplied {
		t.Fatalf("stripe-go signed: %d %+v", r.Code, r.Body)
	}

	wh, err := svix.NewWebhook(testenv.Secret)
	if err != nil {
		t.Fatal(err)
	}
	svixBody := testenv.UsageBody("cus_v", "api_requests", "7")
	sig, err := wh.Sign("msg_svix_1", e.Now(), svixBody)
	if err != nil {
		t.Fatal(err)
	}
	h = http.Header{}
	h.Set("webhook-id", "msg_svix_1")
	h.Set("webhook-timestamp", strconv.FormatInt(e.Now().Unix(), 10))
	h.Set("webhook-signature", sig)
	if r := e.PostReply("default", h, svixBody); r.Code != 200 || r.Body.Status != custody.StatusApplied {
		t.Fatalf("svix signed: %d %+v", r.Code, r.Body)
	}

	got := e.Totals()
	if got["cus_s"] != 12_500_000 || got["cus_v"] != 7_000_000 {
		t.Errorf("totals = %v, want cus_s 12.5 and cus_v 7", got)
	}
}
