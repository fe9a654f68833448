package customer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
)

// Customer is a customer as the registry knows it at one point of its
// history. Registering is optional: the ledger bills any customer id its
// events name; the registry adds a name, an email, ids in other systems
// (e.g. Stripe's cus_…) and plan assignments.
type Customer struct {
	ID          string            `json:"id"`
	Name        string            `json:"name"`
	Email       string            `json:"email"`
	ExternalIDs map[string]string `json:"external_ids"`
	RecordedAt  time.Time         `json:"recorded_at"`
	Note        string            `json:"note,omitempty"`
}

// PlanAssignment says a customer is on a plan from a date on (until a
// later assignment takes effect). Assignments are appended, never edited:
// of two with the same date, the one recorded later wins.
type PlanAssignment struct {
	ID            int64        `json:"id"`
	Customer      string       `json:"customer"`
	Plan          string       `json:"plan"`
	EffectiveFrom pricing.Date `json:"effective_from"`
	RecordedAt    time.Time    `json:"recorded_at"`
	Note          string       `json:"note,omitempty"`
}

// Registry errors a caller branches on.
var (
	ErrCustomerExists  = errors.New("customer already registered")
	ErrNoCustomer      = errors.New("no such customer")
	ErrUnknownPlan     = errors.New("no such plan")
	ErrNothingToChange = errors.New("nothing to change")
)

// InputError is bad input to the registry (an id that is not clean text,
// an external id without a system, a date that is not one, a plan not
// declared or with no version on the date): the message says what to change.
// An API answers it with 4xx; other errors are storage failures.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

func badInput(err error) error {
	if err == nil {
		return nil
	}
	return &InputError{err}
}

// RegistryStore is what the registry needs of the database.
type RegistryStore interface {
	RegistryTx(ctx context.Context, fn func(*schema.RegistryTx) error) error
	CustomerHistory(ctx context.Context, customer string) ([]schema.CustomerRecord, error)
	PlanAssignments(ctx context.Context, customer string) ([]schema.PlanAssignment, error)
}

func customerOf(r schema.CustomerRecord) (Customer, error) {
	c := Customer{ID: r.CustomerID, Name: r.Name, Email: r.Email, RecordedAt: time.UnixMilli(r.RecordedAt).UTC(), Note: r.Note}
	if err := json.Unmarshal([]byte(r.ExternalIDs), &c.ExternalIDs); err != nil {
		return Customer{}, fmt.Errorf("customer %q: external ids: %w", r.CustomerID, err)
	}
	if c.ExternalIDs == nil {
		c.ExternalIDs = map[string]string{}
	}
	return c, nil
}

func (c Customer) record() (schema.CustomerRecord, error) {
	ext := c.ExternalIDs
	if ext == nil {
		ext = map[string]string{}
	}
	b, err := json.Marshal(ext) // map keys marshal sorted: one text per set of ids
	if err != nil {
		return schema.CustomerRecord{}, err
	}
	return schema.CustomerRecord{CustomerID: c.ID, Name: c.Name, Email: c.Email, ExternalIDs: string(b),
		RecordedAt: c.RecordedAt.UnixMilli(), Note: c.Note}, nil
}

func checkCustomer(c Customer) error {
	if c.ID == "" {
		return errors.New("customer id: required")
	}
	if err := ledger.CheckIdentifier(c.ID); err != nil {
		return fmt.Errorf("customer id %q %v", c.ID, err)
	}
	for _, k := range slices.Sorted(maps.Keys(c.ExternalIDs)) {
		if k == "" || ledger.CheckIdentifier(k) != nil || ledger.CheckIdentifier(c.ExternalIDs[k]) != nil {
			return fmt.Errorf("external id %q=%q: want SYSTEM=ID in plain text", k, c.ExternalIDs[k])
		}
	}
	return ledger.CheckTexts(ledger.Text{Field: "name", Value: c.Name}, ledger.Text{Field: "email", Value: c.Email}, ledger.Text{Field: "note", Value: c.Note})
}

func checkAssignment(a PlanAssignment, catalog *pricing.Catalog) error {
	if err := ledger.CheckIdentifier(a.Customer); err != nil || a.Customer == "" {
		return fmt.Errorf("customer id %q: not a customer id", a.Customer)
	}
	if err := a.EffectiveFrom.Check(); err != nil {
		return fmt.Errorf("effective from: %v", err)
	}
	if err := ledger.CheckTexts(ledger.Text{Field: "plan", Value: a.Plan}, ledger.Text{Field: "note", Value: a.Note}); err != nil {
		return err
	}
	if catalog == nil || !catalog.Has(a.Plan) {
		var names []string
		if catalog != nil {
			names = catalog.Names()
		}
		return fmt.Errorf("%w %q in the configuration (plans: %v)", ErrUnknownPlan, a.Plan, names)
	}
	if _, err := catalog.Version(a.Plan, a.EffectiveFrom); err != nil {
		return err
	}
	return nil
}

// AddCustomer registers a new customer and, when plan is set, assigns it
// from a date, in one transaction.
func AddCustomer(ctx context.Context, db RegistryStore, c Customer, plan *PlanAssignment, catalog *pricing.Catalog) error {
	if err := checkCustomer(c); err != nil {
		return badInput(err)
	}
	if plan != nil {
		plan.Customer = c.ID
		if err := checkAssignment(*plan, catalog); err != nil {
			return badInput(err)
		}
	}
	rec, err := c.record()
	if err != nil {
		return err
	}
	return db.RegistryTx(ctx, func(tx *schema.RegistryTx) error {
		prior, err := tx.CustomerHistory(ctx, c.ID)
		if err != nil {
			return err
		}
		if len(prior) > 0 {
			return fmt.Errorf("%w: %q (change it with customers update)", ErrCustomerExists, c.ID)
		}
		if _, err := tx.InsertCustomer(ctx, rec); err != nil {
			return err
		}
		if plan != nil {
			if err := checkOpenPeriods(ctx, tx, *plan); err != nil {
				return badInput(err)
			}
			_, err = tx.InsertPlanAssignment(ctx, plan.record())
		}
		return err
	})
}

// CustomerChange is what customers update changes; nil fields stay.
type CustomerChange struct {
	Name, Email *string
	ExternalIDs map[string]string // set or replace these; an empty value removes one
	Note        string
	At          time.Time
}

// UpdateCustomer appends the customer as changed; the earlier rows stay as
// its history.
func UpdateCustomer(ctx context.Context, db RegistryStore, id string, ch CustomerChange) (Customer, error) {
	var out Customer
	err := db.RegistryTx(ctx, func(tx *schema.RegistryTx) error {
		hist, err := tx.CustomerHistory(ctx, id)
		if err != nil {
			return err
		}
		if len(hist) == 0 {
			return fmt.Errorf("%w %q (register it with customers add)", ErrNoCustomer, id)
		}
		cur, err := customerOf(hist[len(hist)-1])
		if err != nil {
			return err
		}
		next := cur
		next.ExternalIDs = maps.Clone(cur.ExternalIDs)
		if ch.Name != nil {
			next.Name = *ch.Name
		}
		if ch.Email != nil {
			next.Email = *ch.Email
		}
		for k, v := range ch.ExternalIDs {
			if v == "" {
				delete(next.ExternalIDs, k)
			} else {
				next.ExternalIDs[k] = v
			}
		}
		if next.Name == cur.Name && next.Email == cur.Email && maps.Equal(next.ExternalIDs, cur.ExternalIDs) {
			return fmt.Errorf("customer %q: %w", id, ErrNothingToChange)
		}
		next.RecordedAt, next.Note = ch.At, ch.Note
		if err := checkCustomer(next); err != nil {
			return badInput(err)
		}
		rec, err := next.record()
		if err != nil {
			return err
		}
		out = next
		_, err = tx.InsertCustomer(ctx, rec)
		return err
	})
	return out, err
}

func (a PlanAssignment) record() schema.PlanAssignment {
	return schema.PlanAssignment{CustomerID: a.Customer, Plan: a.Plan, EffectiveFrom: string(a.EffectiveFrom),
		RecordedAt: a.RecordedAt.UnixMilli(), Note: a.Note}
}

func assignmentOf(r schema.PlanAssignment) PlanAssignment {
	return PlanAssignment{ID: r.ID, Customer: r.CustomerID, Plan: r.Plan, EffectiveFrom: pricing.Date(r.EffectiveFrom),
		RecordedAt: time.UnixMilli(r.RecordedAt).UTC(), Note: r.Note}
}

// AssignPlan appends a plan assignment. The plan must be declared and have
// a version in force on the date.
func AssignPlan(ctx context.Context, db RegistryStore, a PlanAssignment, catalog *pricing.Catalog) (PlanAssignment, error) {
	if err := checkAssignment(a, catalog); err != nil {
		return PlanAssignment{}, badInput(err)
	}
	err := db.RegistryTx(ctx, func(tx *schema.RegistryTx) error {
		if err := checkOpenPeriods(ctx, tx, a); err != nil { // assignclosed.go
			return badInput(err)
		}
		var err error
		a.ID, err = tx.InsertPlanAssignment(ctx, a.record())
		return err
	})
	return a, err
}

// Customers lists every registered customer as it is now, by id.
func Customers(ctx context.Context, db RegistryStore) ([]Customer, error) {
	rs, err := db.CustomerHistory(ctx, "")
	if err != nil {
		return nil, err
	}
	var out []Customer
	for i, r := range rs {
		if i+1 < len(rs) && rs[i+1].CustomerID == r.CustomerID {
			continue // a later row of the same customer follows
		}
		c, err := customerOf(r)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// CustomerHistory is one customer's registry rows, oldest first.
func CustomerHistory(ctx context.Context, db RegistryStore, id string) ([]Customer, error) {
	rs, err := db.CustomerHistory(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make([]Customer, 0, len(rs))
	for _, r := range rs {
		c, err := customerOf(r)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// PlanAssignments lists one customer's assignments ("" for all), by
// customer, date and the order they were recorded.
func PlanAssignments(ctx context.Context, db RegistryStore, customer string) ([]PlanAssignment, error) {
	rs, err := db.PlanAssignments(ctx, customer)
	if err != nil {
		return nil, err
	}
	out := make([]PlanAssignment, len(rs))
	for i, r := range rs {
		out[i] = assignmentOf(r)
	}
	return out, nil
}

// Plans answers which plan a customer is on, on a day: its latest
// assignment in force, else the configured default.
type Plans struct {
	Default string
	byCust  map[string][]PlanAssignment // each in effective order, ties in recorded order
}

// NewPlans indexes assignments as PlanAssignments returns them.
func NewPlans(defaultPlan string, as []PlanAssignment) *Plans {
	p := &Plans{Default: defaultPlan, byCust: map[string][]PlanAssignment{}}
	for _, a := range as {
		p.byCust[a.Customer] = append(p.byCust[a.Customer], a)
	}
	return p
}

// On is the plan customer is on, on day, and the assignment that says so
// (nil: the default plan, or no plan at all when the default is empty).
func (p *Plans) On(customer string, day pricing.Date) (string, *PlanAssignment) {
	as := p.byCust[customer]
	for i := len(as) - 1; i >= 0; i-- {
		if string(as[i].EffectiveFrom) <= string(day) { // YYYY-MM-DD orders as text
			return as[i].Plan, &as[i]
		}
	}
	return p.Default, nil
}

// Changes are the days customer's assignments take effect, in order: where
// a period may split at a change of plan (parts.go).
func (p *Plans) Changes(customer string) []pricing.Date {
	var days []pricing.Date
	for _, a := range p.byCust[customer] {
		days = append(days, a.EffectiveFrom)
	}
	return days
}

// CustomerToday is a registered customer as it is now, with its plan on a
// day: a row of customers list and of the admin API's GET /v1/customers.
type CustomerToday struct {
	Customer
	Plan string `json:"plan"`
}

// CustomersToday lists the registered customers as they are now, by id,
// each with its plan on day (its assignment in force, else defaultPlan).
func CustomersToday(ctx context.Context, db RegistryStore, defaultPlan string, day pricing.Date) ([]CustomerToday, error) {
	cs, err := Customers(ctx, db)
	if err != nil {
		return nil, err
	}
	as, err := PlanAssignments(ctx, db, "")
	if err != nil {
		return nil, err
	}
	plans := NewPlans(defaultPlan, as)
	out := make([]CustomerToday, 0, len(cs))
	for _, c := range cs {
		plan, _ := plans.On(c.ID, day)
		out = append(out, CustomerToday{c, plan})
	}
	return out, nil
}

// CustomerView is one customer's registry history, plan assignments and
// plan on a day: what customers show, plan show and the admin API's GET
// /v1/customers/{id} print.
type CustomerView struct {
	Customer    string           `json:"customer"`
	PlanToday   string           `json:"plan_today"`
	Source      string           `json:"plan_source"` // where PlanToday comes from, in words
	History     []Customer       `json:"history"`
	Assignments []PlanAssignment `json:"assignments"`
	// Known: registered or assigned a plan (else only the default applies).
	Known bool `json:"-"`
}

// ViewCustomer reads what CustomerView shows of customer id on day.
func ViewCustomer(ctx context.Context, db RegistryStore, defaultPlan, id string, day pricing.Date) (*CustomerView, error) {
	hist, err := CustomerHistory(ctx, db, id)
	if err != nil {
		return nil, err
	}
	as, err := PlanAssignments(ctx, db, id)
	if err != nil {
		return nil, err
	}
	plan, by := NewPlans(defaultPlan, as).On(id, day)
	source := "the default plan (customers.default_plan)"
	if by != nil {
		source = fmt.Sprintf("assignment %d, from %s", by.ID, by.EffectiveFrom)
	} else if plan == "" {
		source = "no assignment and no customers.default_plan: invoices carry quantities only"
	}
	if hist == nil {
		hist = []Customer{}
	}
	if as == nil {
		as = []PlanAssignment{}
	}
	return &CustomerView{Customer: id, PlanToday: plan, Source: source, History: hist, Assignments: as,
		Known: len(hist) > 0 || len(as) > 0}, nil
}

// With is p and assignment a besides (a plan change's preview).
func (p *Plans) With(a PlanAssignment) *Plans {
	out := &Plans{Default: p.Default, byCust: maps.Clone(p.byCust)}
	out.byCust[a.Customer] = append(slices.Clone(p.byCust[a.Customer]), a)
	return out
}
