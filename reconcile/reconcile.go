package reconcile

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ledger"
)

// Store is what a Reconciler reads from storage; *schema.DB satisfies it.
// On a database older than reconcile's tables (a read-only dry run) it finds
// no checkpoint and no redelivery request.
type Store interface {
	CheckpointReader
	ReceiptsPresent(ctx context.Context, provider string, eventIDs []string) ([]string, error)
	RedeliveriesRequested(ctx context.Context, provider string, eventIDs []string) ([]string, error)
}

// Reconciler compares one provider's events with the stored receipts.
// Exported fields have the defaults NewReconciler sets; override them before Run.
type Reconciler struct {
	Provider string
	Source   Source
	DB       Store           // reads: which events are present, the checkpoint
	Writer   *custody.Writer // writes: deliveries, checkpoint, redelivery requests; unused by a dry run
	Mapper   *ledger.Mapper
	// HandlerVersion is stored on the receipts it inserts, as for webhooks.
	HandlerVersion string
	// Window is how far back a run looks at most. Default 72h.
	Window time.Duration
	// Overlap is how far before the previous run's end the next one starts;
	// it must exceed the clock skew between this host and the provider.
	// Default 15m.
	Overlap time.Duration
	// Settle leaves the newest events to their webhooks: a run ends this long
	// before now, so a delivery still in flight is not inserted (or redelivered)
	// twice over. Default 2m.
	Settle time.Duration
	Now    func() time.Time
	Log    *slog.Logger
}

// NewReconciler returns a reconciler with the defaults.
func NewReconciler(provider string, src Source, db Store, w *custody.Writer, m *ledger.Mapper, handlerVersion string) *Reconciler {
	return &Reconciler{
		Provider: provider, Source: src, DB: db, Writer: w, Mapper: m, HandlerVersion: handlerVersion,
		Window: 72 * time.Hour, Overlap: 15 * time.Minute, Settle: 2 * time.Minute,
		Now: time.Now, Log: slog.New(slog.DiscardHandler),
	}
}

// Options are one run's choices.
type Options struct {
	// Since, when set, looks back this far from now instead of resuming or
	// continuing from the checkpoint. A complete run still moves the checkpoint.
	Since time.Duration
	// DryRun lists and compares but writes nothing and asks for nothing.
	DryRun bool
}

// Report counts what a run saw and did. In a dry run, Inserted and
// RedeliveryRequested count what a real run would do.
type Report struct {
	Provider   string    `json:"provider"`
	Source     string    `json:"source"`
	WindowFrom time.Time `json:"window_from"`
	WindowTo   time.Time `json:"window_to"`
	Resumed    bool      `json:"resumed"` // continued an interrupted run from its checkpoint
	DryRun     bool      `json:"dry_run"`
	Pages      int       `json:"pages"`

	Seen                int `json:"seen"`
	AlreadyPresent      int `json:"already_present"`
	Inserted            int `json:"inserted"`
	RedeliveryRequested int `json:"redelivery_requested"`
	// RedeliveryPending are missing events whose redelivery an earlier run
	// already asked for: never asked twice.
	RedeliveryPending int `json:"redelivery_pending"`
	Failed            int `json:"failed"`
	// MappingFailed counts inserted events stored with status failed (their
	// payload did not fit the mapping); fix the mapping and replay them.
	MappingFailed int `json:"mapping_failed"`

	Complete bool     `json:"complete"` // the whole window was handled; the checkpoint moved to its end
	Errors   []string `json:"errors,omitempty"`
}

const maxReportErrors = 10

func (r *Report) fail(err error) {
	r.Failed++
	if len(r.Errors) < maxReportErrors {
		r.Errors = append(r.Errors, err.Error())
	}
}

// ErrIncomplete is returned (wrapped) when a run stopped before the end of its
// window; the checkpoint holds the last complete page.
var ErrIncomplete = errors.New("reconcile incomplete")

// Run reconciles one window: each page's missing events are inserted (or
// their redelivery requested), and only then does the checkpoint move past
// that page. Any failure stops the run with the checkpoint where it was.
func (r *Reconciler) Run(ctx context.Context, o Options) (*Report, error) {
	// Millisecond precision, as stored: a resumed window is the same window.
	now := time.UnixMilli(r.Now().UnixMilli()).UTC()
	rep := &Report{Provider: r.Provider, Source: r.Source.Name(), DryRun: o.DryRun}
	cp, found, err := LoadCheckpoint(ctx, r.DB, r.Provider)
	if err != nil {
		return rep, err
	}
	var w Window
	cursor, pages := "", 0
	settle := r.Settle
	switch {
	case o.Since > 0:
		if o.Since <= settle {
			settle = 0
		}
		w = Window{From: now.Add(-o.Since), To: now.Add(-settle)}
	case found && cp.Cursor != "" && !time.UnixMilli(cp.WindowEnd).Before(now.Add(-r.Window)):
		// An interrupted run resumes at its cursor, unless its whole window
		// has aged out of the look-back (its cursor may be long invalid):
		// then a fresh window below covers what still matters.
		w = Window{From: time.UnixMilli(cp.WindowStart), To: time.UnixMilli(cp.WindowEnd)}
		cursor, pages, rep.Resumed = cp.Cursor, cp.Pages, true
	default:
		w = Window{From: now.Add(-r.Window), To: now.Add(-settle)}
		if found && cp.CompletedThrough > 0 {
			if from := time.UnixMilli(cp.CompletedThrough).Add(-r.Overlap); from.After(w.From) {
				w.From = from
			}
		}
	}
	w.From, w.To = time.UnixMilli(w.From.UnixMilli()).UTC(), w.To.UTC()
	rep.WindowFrom, rep.WindowTo = w.From, w.To
	if !w.From.Before(w.To) {
		rep.Complete = true
		return rep, nil
	}
	log := r.Log.With("provider", r.Provider, "source", rep.Source)
	seen := map[string]bool{}
	for {
		page, err := r.Source.List(ctx, w, cursor)
		if err != nil {
			rep.fail(err)
			return rep, fmt.Errorf("%w: %s: list page %d: %v", ErrIncomplete, r.Provider, pages+1, err)
		}
		rep.Pages++
		pages++
		before := rep.Failed
		r.handle(ctx, page, seen, now, o.DryRun, rep)
		if n := rep.Failed - before; n > 0 {
			return rep, fmt.Errorf("%w: %s: %d events on page %d failed; the checkpoint stays before that page: %s",
				ErrIncomplete, r.Provider, n, pages, strings.Join(rep.Errors, "; "))
		}
		if page.Next != "" && page.Next == cursor {
			rep.fail(fmt.Errorf("the provider returned the same cursor %q twice", cursor))
			return rep, fmt.Errorf("%w: %s: %s", ErrIncomplete, r.Provider, rep.Errors[len(rep.Errors)-1])
		}
		next := Checkpoint{Provider: r.Provider, WindowStart: w.From.UnixMilli(), WindowEnd: w.To.UnixMilli(),
			Cursor: page.Next, Pages: pages, CompletedThrough: cp.CompletedThrough}
		if page.Next == "" {
			next.Pages, next.CompletedThrough = 0, w.To.UnixMilli()
		}
		if !o.DryRun {
			if err := r.Writer.Submit(ctx, saveCheckpoint(next)); err != nil {
				rep.fail(err)
				return rep, fmt.Errorf("%w: %s: %v", ErrIncomplete, r.Provider, err)
			}
		}
		log.Debug("reconcile page", "page", pages, "events", len(page.Events), "next", page.Next != "")
		if page.Next == "" {
			rep.Complete = true
			return rep, nil
		}
		cursor = page.Next
	}
}

// handle compares one page with the receipts and repairs what is missing.
func (r *Reconciler) handle(ctx context.Context, page Page, seen map[string]bool, now time.Time, dryRun bool, rep *Report) {
	var events []Event
	for _, e := range page.Events {
		// The rule of the webhook path: an event id that is not clean text cannot be a receipt's key.
		if err := ledger.CheckIdentifier(e.ID); err != nil {
			rep.fail(fmt.Errorf("event %q: event id: %w", e.ID, err))
			continue
		}
		// GitHub lists every attempt of an event; one is enough.
		if !seen[e.ID] {
			seen[e.ID] = true
			events = append(events, e)
		}
	}
	rep.Seen += len(events)
	if len(events) == 0 {
		return
	}
	present, err := r.present(ctx, "receipts", r.DB.ReceiptsPresent, events)
	if err != nil {
		for range events {
			rep.fail(err)
		}
		return
	}
	var missing, redeliver []Event
	for _, e := range events {
		switch {
		case present[e.ID]:
			rep.AlreadyPresent++
		case e.Body != nil:
			missing = append(missing, e)
		default:
			redeliver = append(redeliver, e)
		}
	}
	if dryRun {
		rep.Inserted += len(missing)
	} else {
		r.insert(ctx, page, missing, now, rep)
	}
	if len(redeliver) > 0 {
		r.redeliver(ctx, redeliver, dryRun, rep)
	}
}

// insert submits the missing events as deliveries, concurrently, so they
// share the writer's group commits.
func (r *Reconciler) insert(ctx context.Context, page Page, events []Event, now time.Time, rep *Report) {
	ds := make([]*custody.Delivery, len(events))
	errs := make([]error, len(events))
	var wg sync.WaitGroup
	for i, e := range events {
		sum := sha256.Sum256(e.Body)
		d := &custody.Delivery{
			Provider:       r.Provider,
			EventID:        e.ID,
			EventType:      e.Type,
			Body:           e.Body,
			BodySHA256:     sum[:],
			Source:         custody.SourceReconcile,
			HandlerVersion: r.HandlerVersion,
			ReceivedAt:     now,
			// No HTTP reply goes with a reconciled event, hence status 0;
			// the request id is the provider's for the page it came in.
			Attempt: custody.Attempt{RemoteAddr: "reconcile:" + r.Source.Name(), UserAgent: "hookledger-reconcile", RequestID: page.RequestID},
		}
		d.Classify(r.Mapper)
		ds[i] = d
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.Writer.Submit(ctx, d)
		}()
	}
	wg.Wait()
	for i, d := range ds {
		switch {
		case errs[i] != nil:
			rep.fail(fmt.Errorf("insert %s: %w", d.EventID, errs[i]))
		case d.Outcome == custody.OutcomeInserted:
			rep.Inserted++
			if d.StoredStatus == custody.StatusFailed {
				rep.MappingFailed++
			}
		default:
			// A webhook won the race since the check: the key decided.
			rep.AlreadyPresent++
		}
	}
}

// redeliver asks the provider to send each event again, once: an event whose
// redelivery was already requested is left to that request.
func (r *Reconciler) redeliver(ctx context.Context, events []Event, dryRun bool, rep *Report) {
	rd, ok := r.Source.(Redeliverer)
	if !ok {
		for _, e := range events {
			rep.fail(fmt.Errorf("event %s: the source gave no body and cannot redeliver", e.ID))
		}
		return
	}
	asked, err := r.present(ctx, "redelivery_requests", r.DB.RedeliveriesRequested, events)
	if err != nil {
		for range events {
			rep.fail(err)
		}
		return
	}
	for _, e := range events {
		switch {
		case asked[e.ID]:
			rep.RedeliveryPending++
		case dryRun:
			rep.RedeliveryRequested++
		default:
			// Ask, then record: a crash in between asks once more on the next
			// run (a harmless duplicate delivery), never zero times.
			code, err := rd.Redeliver(ctx, e)
			if err == nil {
				err = r.Writer.Submit(ctx, recordRedelivery(r.Provider, e, code))
			}
			if err != nil {
				rep.fail(fmt.Errorf("redeliver %s: %w", e.ID, err))
				continue
			}
			rep.RedeliveryRequested++
		}
	}
}

// present returns which of the events' ids lookup finds in table (receipts
// or redelivery_requests, named in errors).
func (r *Reconciler) present(ctx context.Context, table string, lookup func(context.Context, string, []string) ([]string, error),
	events []Event) (map[string]bool, error) {
	ids := make([]string, len(events))
	for i, e := range events {
		ids[i] = e.ID
	}
	found, err := lookup(ctx, r.Provider, ids)
	if err != nil {
		return nil, fmt.Errorf("look up %s: %w", table, err)
	}
	m := make(map[string]bool, len(found))
	for _, id := range found {
		m[id] = true
	}
	return m, nil
}
