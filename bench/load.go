// Package bench measures how many webhooks per second a receiver takes: a load
// generator that signs deliveries exactly as a provider would, a reference
// receiver that verifies and parses but stores nothing, a check that a run's
// events reached the ledger exactly once, and a generator that pre-fills a
// database so cost can be measured against a large ledger.
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/scheme"
)

// EventType is the type of every generated event; the default configuration
// maps it to a usage row.
const EventType = "usage.recorded"

// Load describes one run. Fields are set by the caller; Plan validates them.
type Load struct {
	// URL is the full webhook URL, e.g. http://127.0.0.1:8080/webhooks/default.
	URL string
	// Scheme and Key sign every delivery, exactly as the provider would.
	Scheme scheme.Scheme
	Key    []byte
	// Events is the number of unique events.
	Events int
	// Connections is the number of concurrent keep-alive connections.
	Connections int
	// Dup is the fraction of extra duplicate deliveries (0.1: one extra
	// delivery per ten events). Half of them race their original: they are
	// sent right next to it, so both are in flight at once. The other half are
	// late retries, sent only after the original has been answered.
	Dup float64
	// Customers is how many customers the events are spread over.
	Customers int
	// Seed makes customers, quantities and the order of duplicates repeatable.
	Seed uint64
	// RunID is in every event id (directly in sequential ids, hashed into
	// random ones) and names the run's meter, so a run's events can be told
	// apart from everything else in the ledger.
	RunID string
	// IDs is how event ids are made: Sequential (the default) or Random.
	IDs IDs
	// Timeout bounds each request. Default 30 s.
	Timeout time.Duration
	// Rate, when above 0, paces the run: request k is sent no earlier than
	// k/Rate seconds after the start, so the receiver sees a steady load of
	// Rate requests/s (as long as it keeps up) instead of as many as
	// Connections can send.
	Rate float64
	// Batch, when above 0, sends to the ingest API (URL is its /v1/events)
	// instead: Batch events per request, as a JSON array of generic usage
	// events with source APISource, authenticated by APIKey. Duplicates are
	// batched like the rest: a racing one rides with or right after its
	// original, the late ones in requests sent after their originals'.
	Batch  int
	APIKey string
}

// APISource is the source of every event a batch run sends: the ingest
// API stores event i as APISource#id.
const APISource = "bench"

// Event is one unique generated event.
type Event struct {
	ID       string
	Customer string
	Quantity ledger.Quantity
}

// Plan is a run prepared in full before the clock starts: every body built and
// every delivery signed, so the timed run measures the receiver, not the signer.
type Plan struct {
	Load
	Meter      string
	Events     []Event
	deliveries []delivery
	requests   []request
}

// request is what one HTTP request carries: one delivery, or a batch.
type request struct {
	items  []int // indexes into deliveries
	late   bool  // wait for every item's original to be answered first
	header http.Header
	body   []byte
}

type delivery struct {
	event  int
	dup    bool
	late   bool // wait for the original's answer before sending
	header http.Header
	body   []byte
}

// Meter is the meter name a run's events are recorded under.
func Meter(runID string) string { return "bench_" + runID }

// EventID is the sequential id of event i of a run. It is zero-padded so a
// run's ids form one contiguous range in the (provider, event_id) index.
func EventID(runID string, i int) string { return fmt.Sprintf("bench-%s-%08d", runID, i) }

// Plan builds and signs every delivery of the run.
func (l Load) Plan(now time.Time) (*Plan, error) {
	switch {
	case l.URL == "":
		return nil, errors.New("URL is required")
	case l.Events < 1:
		return nil, fmt.Errorf("events must be at least 1, got %d", l.Events)
	case l.Connections < 1:
		return nil, fmt.Errorf("connections must be at least 1, got %d", l.Connections)
	case l.Dup < 0 || l.Dup > 1:
		return nil, fmt.Errorf("dup must be between 0 and 1, got %g", l.Dup)
	case l.Customers < 1:
		return nil, fmt.Errorf("customers must be at least 1, got %d", l.Customers)
	case l.RunID == "":
		return nil, errors.New("run id is required")
	case l.IDs != Sequential && l.IDs != Random:
		return nil, fmt.Errorf("unknown ids %d", l.IDs)
	case l.Batch < 0:
		return nil, fmt.Errorf("batch must not be negative, got %d", l.Batch)
	case l.Rate < 0 || math.IsNaN(l.Rate) || math.IsInf(l.Rate, 0):
		return nil, fmt.Errorf("rate must be a number of requests per second, 0 for as fast as they go, got %g", l.Rate)
	case l.Batch > 0 && l.APIKey == "":
		return nil, errors.New("a batch run needs an API key")
	case l.Batch == 0 && (l.Scheme == nil || len(l.Key) == 0):
		return nil, errors.New("a scheme and key are required")
	}
	if l.Timeout == 0 {
		l.Timeout = 30 * time.Second
	}
	rng := rand.New(rand.NewPCG(l.Seed, 0x686f6f6b))
	p := &Plan{Load: l, Meter: Meter(l.RunID), Events: make([]Event, l.Events)}
	occurred := now.UTC().Truncate(time.Second).Format(time.RFC3339)
	bodies := make([][]byte, l.Events)
	for i := range p.Events {
		e := Event{
			ID:       l.IDs.EventID(l.RunID, i),
			Customer: "cus_" + strconv.Itoa(rng.IntN(l.Customers)),
			// 0.001 to 1000.000: exercises the decimal path, not just integers.
			Quantity: ledger.Quantity(1+rng.IntN(1_000_000)) * 1000,
		}
		p.Events[i] = e
		b, err := eventBody(l.Scheme, e, p.Meter, occurred, l.Batch > 0)
		if err != nil {
			return nil, err
		}
		bodies[i] = b
	}

	// Choose which events get a duplicate delivery, and which of those race.
	dups := int(l.Dup*float64(l.Events) + 0.5)
	racing := make(map[int]bool, dups/2+1)
	var late []int
	for k, i := range rng.Perm(l.Events)[:dups] {
		if k%2 == 0 {
			racing[i] = true
		} else {
			late = append(late, i)
		}
	}
	p.deliveries = make([]delivery, 0, l.Events+dups)
	for i := range p.Events {
		p.deliveries = append(p.deliveries, p.sign(i, bodies[i], false, false, now))
		if racing[i] {
			p.deliveries = append(p.deliveries, p.sign(i, bodies[i], true, false, now))
		}
	}
	for _, i := range late {
		p.deliveries = append(p.deliveries, p.sign(i, bodies[i], true, true, now))
	}
	p.pack()
	return p, nil
}

// pack groups the deliveries into requests: one each for webhooks, Batch
// at a time for the ingest API (the late retries in requests of their own).
func (p *Plan) pack() {
	if p.Batch == 0 {
		p.requests = make([]request, len(p.deliveries))
		for k, d := range p.deliveries {
			p.requests[k] = request{items: []int{k}, late: d.late, header: d.header, body: d.body}
		}
		return
	}
	for start := 0; start < len(p.deliveries); {
		late := p.deliveries[start].late
		r := request{late: late, header: http.Header{}}
		r.header.Set("Content-Type", "application/json")
		r.header.Set("User-Agent", "hookledger-bench")
		r.header.Set("Authorization", "Bearer "+p.APIKey)
		var body bytes.Buffer
		body.WriteByte('[')
		for k := start; k < len(p.deliveries) && len(r.items) < p.Batch && p.deliveries[k].late == late; k++ {
			if len(r.items) > 0 {
				body.WriteByte(',')
			}
			body.Write(p.deliveries[k].body)
			r.items = append(r.items, k)
		}
		body.WriteByte(']')
		r.body = body.Bytes()
		p.requests = append(p.requests, r)
		start += len(r.items)
	}
}

// StoredID is the event_id event i is stored under: its id for a webhook,
// APISource#id through the ingest API.
func (p *Plan) StoredID(i int) string { return p.storedAs(p.Events[i].ID) }

func (p *Plan) storedAs(id string) string {
	if p.Batch > 0 {
		return APISource + "#" + id
	}
	return id
}

// sign signs one delivery. A duplicate is signed anew, as a provider signs each
// retry, but carries the same body and event id.
func (p *Plan) sign(i int, body []byte, dup, late bool, now time.Time) delivery {
	if p.Batch > 0 { // the request carries the API key; nothing is signed
		return delivery{event: i, dup: dup, late: late, body: body}
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "hookledger-bench")
	p.Scheme.Sign(h, body, p.Key, p.Events[i].ID, EventType, now)
	return delivery{event: i, dup: dup, late: late, header: h, body: body}
}

func eventBody(s scheme.Scheme, e Event, meter, occurred string, api bool) ([]byte, error) {
	event := map[string]any{
		"id":   e.ID,
		"type": EventType,
		"data": map[string]any{
			"customer":    e.Customer,
			"meter":       meter,
			"quantity":    json.Number(e.Quantity.String()),
			"occurred_at": occurred,
		},
	}
	if api {
		event["source"] = APISource
	} else if b, ok := s.(scheme.BodyIdentified); ok {
		event[b.IDField()] = e.ID // where the provider carries it, e.g. Slack's event_id
	}
	return json.Marshal(event)
}

// Requests is the number of requests the plan sends.
func (p *Plan) Requests() int { return len(p.requests) }

// Deliveries is the number of deliveries (events and duplicates) the plan sends.
func (p *Plan) Deliveries() int { return len(p.deliveries) }

// Outcome is what a run observed, per delivery and per event.
type Outcome struct {
	Result Result
	// Acked[i] reports whether any delivery of event i got a 2xx.
	Acked []bool
	// Delivered counts deliveries (originals and duplicates) answered 2xx.
	Delivered int
}

// Run sends every delivery over Connections keep-alive connections and
// measures each request from send to the last byte of the answer. progress,
// if not nil, is incremented after each request.
func (p *Plan) Run(ctx context.Context, progress *atomic.Int64) (*Outcome, error) {
	n := len(p.requests)
	latency := make([]time.Duration, n)
	status := make([]int, n) // 0: transport error
	var firstErr error
	var errOnce sync.Once
	answered := make([]chan struct{}, len(p.Events))
	for i := range answered {
		answered[i] = make(chan struct{})
	}

	var next atomic.Int64
	var wg sync.WaitGroup
	cpu0, cpuOK := processCPU()
	start := time.Now()
	for range p.Connections {
		// One transport per worker holds exactly one keep-alive connection.
		client := &http.Client{
			Timeout: p.Timeout,
			Transport: &http.Transport{
				Proxy:               nil,
				DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
				MaxConnsPerHost:     1,
				MaxIdleConnsPerHost: 1,
				DisableCompression:  true,
				IdleConnTimeout:     time.Minute,
			},
		}
		wg.Go(func() {
			defer client.CloseIdleConnections()
			for {
				k := int(next.Add(1)) - 1
				if k >= n || ctx.Err() != nil {
					return
				}
				if p.Rate > 0 {
					due := start.Add(time.Duration(float64(k) / p.Rate * float64(time.Second)))
					select {
					case <-time.After(time.Until(due)):
					case <-ctx.Done():
						return
					}
				}
				r := &p.requests[k]
				if r.late {
					for _, item := range r.items {
						select {
						case <-answered[p.deliveries[item].event]:
						case <-ctx.Done():
							return
						}
					}
				}
				t0 := time.Now()
				code, err := post(ctx, client, p.URL, r)
				latency[k] = time.Since(t0)
				status[k] = code
				if err != nil {
					errOnce.Do(func() { firstErr = err })
				}
				for _, item := range r.items {
					if d := &p.deliveries[item]; !d.dup {
						close(answered[d.event])
					}
				}
				if progress != nil {
					progress.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1, _ := processCPU()
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	out := &Outcome{Acked: make([]bool, len(p.Events))}
	for k, r := range p.requests {
		if status[k]/100 == 2 {
			for _, item := range r.items {
				out.Acked[p.deliveries[item].event] = true
				out.Delivered++
			}
		}
	}
	out.Result = summarize(p, latency, status, elapsed)
	out.Result.EventsPerSecond = float64(out.Delivered) / elapsed.Seconds()
	if cpuOK && n > 0 {
		out.Result.LoadCPUPerRequest = float64(cpu1-cpu0) / float64(time.Microsecond) / float64(n)
	}
	if firstErr != nil {
		out.Result.FirstError = firstErr.Error()
	}
	return out, nil
}

func post(ctx context.Context, client *http.Client, url string, r *request) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(r.body))
	if err != nil {
		return 0, err
	}
	req.Header = r.header // each request is sent once, so it can be handed over as is
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	// Reading to EOF lets the connection be reused.
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}
