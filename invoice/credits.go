package invoice

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hookledger/hookledger/chainhash"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
)

// Prepaid credits (docs/invoicing.md, "Credits"). A grant is money a
// customer may spend, in one currency, from its effective time to its
// expiry. The credit ledger (schema.CreditEntry, its own hash chain) holds
// every grant and everything that changed what one has left: a burn (what
// it gave a closed invoice, written in the close's transaction), a void, an
// expiry. What a grant has left is never stored apart from those rows: it
// is replayed from them (foldCredits), by a close, a preview, the credits
// views and verify alike.
//
// Which grants pay an invoice: its customer's, recorded before the close's
// cutoff (as its usage rows are), in the invoice's currency, effective
// before its period ends and by the close, not expired by the close, not
// voided before it. They pay its total in the burn order
// (pricing.BurnOrder); what each gave is frozen on the invoice.

// Credit entry kinds.
const (
	CreditGranted = "grant"
	CreditBurned  = "burn"
	CreditVoided  = "void"
	CreditExpired = "expiry"
)

// Grant is one credit grant and where it stands after the entries read.
type Grant struct {
	ID          string `json:"id"`
	Customer    string `json:"customer"`
	Currency    string `json:"currency"`
	Category    string `json:"category"`
	Priority    int64  `json:"priority"`
	EffectiveAt int64  `json:"-"`
	ExpiresAt   int64  `json:"-"`       // 0: never
	Amount      string `json:"amount"`  // granted
	Balance     string `json:"balance"` // left to give
	// Status is active, voided or expired (a void or an expiry row was
	// written). The views (Grants) also say expired when the expiry has
	// passed before its row was written, scheduled before it takes effect,
	// and spent when it has nothing left.
	Status     string `json:"status"`
	Reason     string `json:"reason"`
	Actor      string `json:"actor"`
	RecordedAt int64  `json:"-"`
	Seq        int64  `json:"entry"` // its entry's id: the burn order's "oldest"
	// Burns are the invoices it paid, in order.
	Burns []InvoiceCredit `json:"burns"`

	balance pricing.Decimal
	cur     pricing.Currency
}

// InvoiceCredit is what one grant gave one invoice, frozen at its close,
// and the grant's balance after it.
type InvoiceCredit struct {
	Grant   string `json:"grant"`
	Invoice int64  `json:"invoice,omitempty"`
	Amount  string `json:"amount"`
	Balance string `json:"balance_after"`
}

// foldCredits replays entries (in id order) into their grants, in the
// order the grants were made. Each entry's stored amount and balance are
// checked against the replay: a mismatch is returned as a problem of that
// entry (verify reports it; a close refuses to go on).
func foldCredits(entries []schema.CreditEntry) ([]*Grant, []ledger.Problem) {
	var grants []*Grant
	byID := map[string]*Grant{}
	var problems []ledger.Problem
	bad := func(e schema.CreditEntry, format string, args ...any) {
		problems = append(problems, ledger.Problem{Table: "credit_entries", ID: e.ID, Msg: fmt.Sprintf(format, args...)})
	}
	for _, e := range entries {
		if e.Kind == CreditGranted {
			cur, err := pricing.ParseCurrency(e.Currency)
			if err != nil {
				bad(e, "grant %s: %v", e.GrantID, err)
				continue
			}
			amt, err := cur.CreditAmount(e.Amount)
			if err != nil {
				bad(e, "grant %s: %v", e.GrantID, err)
				continue
			}
			if e.Balance != e.Amount {
				bad(e, "grant %s: balance %s, but it grants %s", e.GrantID, e.Balance, e.Amount)
			}
			g := &Grant{ID: e.GrantID, Customer: e.Customer, Currency: e.Currency, Category: e.Category, Priority: e.Priority,
				EffectiveAt: e.EffectiveAt, ExpiresAt: e.ExpiresAt, Amount: e.Amount, Balance: e.Amount, Status: "active",
				Reason: e.Reason, Actor: e.Actor, RecordedAt: e.RecordedAt, Seq: e.ID, Burns: []InvoiceCredit{}, balance: amt, cur: cur}
			grants, byID[e.GrantID] = append(grants, g), g
			continue
		}
		g := byID[e.GrantID]
		switch {
		case g == nil:
			bad(e, "%s of grant %s, which no earlier entry grants", e.Kind, e.GrantID)
			continue
		case g.Status != "active":
			bad(e, "%s of grant %s, which was %s before", e.Kind, e.GrantID, g.Status)
			continue
		case e.Customer != g.Customer || e.Currency != g.Currency:
			bad(e, "%s of grant %s names %s in %s, the grant %s in %s", e.Kind, e.GrantID, e.Customer, e.Currency, g.Customer, g.Currency)
			continue
		}
		switch e.Kind {
		case CreditBurned:
			amt, err := pricing.ParseDecimal(e.Amount)
			if err == nil && amt.Sign() <= 0 {
				err = errors.New("not above zero")
			}
			var left pricing.Decimal
			if err == nil {
				left, err = pricing.Sub(g.balance, amt)
			}
			if err == nil && left.Sign() < 0 {
				err = fmt.Errorf("more than the %s it had", g.Balance)
			}
			if err == nil {
				left, err = g.cur.Amount(left)
			}
			if err != nil {
				bad(e, "burn of grant %s for invoice %d: amount %s: %v", e.GrantID, e.InvoiceID, e.Amount, err)
				continue
			}
			g.balance, g.Balance = left, left.String()
			g.Burns = append(g.Burns, InvoiceCredit{Grant: g.ID, Invoice: e.InvoiceID, Amount: e.Amount, Balance: g.Balance})
		case CreditVoided, CreditExpired:
			if e.Amount != g.Balance {
				bad(e, "%s of grant %s forfeits %s, but it had %s", e.Kind, e.GrantID, e.Amount, g.Balance)
			}
			g.Status = map[string]string{CreditVoided: "voided", CreditExpired: "expired"}[e.Kind]
			zero, _ := g.cur.Amount(pricing.NewDecimal(0, 0))
			g.balance, g.Balance = zero, zero.String()
		default:
			bad(e, "unknown kind %q", e.Kind)
			continue
		}
		if e.Balance != g.Balance {
			bad(e, "%s of grant %s: balance %s, but the grant's entries leave %s", e.Kind, e.GrantID, e.Balance, g.Balance)
		}
	}
	return grants, problems
}

// applies reports whether g may pay inv (see the package comment above):
// its currency, effective before the period ends and by the close, not
// expired by it, not voided or expired by an earlier entry.
func (g *Grant) applies(inv *Invoice) bool {
	return g.Status == "active" && g.Currency == inv.Money.Currency &&
		g.EffectiveAt < inv.PeriodEnd && g.EffectiveAt <= inv.ClosedAt &&
		(g.ExpiresAt == 0 || g.ExpiresAt > inv.ClosedAt) && g.balance.Sign() > 0
}

// creditsFor is what the grants in entries (the invoice's customer's,
// recorded before its cutoff) give inv, in the burn order.
func creditsFor(inv *Invoice, entries []schema.CreditEntry) ([]InvoiceCredit, error) {
	if inv.Money.Currency == "" || inv.Money.Total == "" || len(entries) == 0 {
		return nil, nil
	}
	grants, problems := foldCredits(entries)
	if len(problems) > 0 {
		return nil, fmt.Errorf("credits of %s: %w (run hookledger verify)", inv.Customer, problems[0])
	}
	var usable []pricing.CreditGrant
	byID := map[string]*Grant{}
	for _, g := range grants {
		if g.applies(inv) {
			usable = append(usable, pricing.CreditGrant{ID: g.ID, Available: g.balance, Priority: g.Priority, ExpiresAt: g.ExpiresAt, Seq: g.Seq})
			byID[g.ID] = g
		}
	}
	if len(usable) == 0 {
		return nil, nil
	}
	cur, err := pricing.ParseCurrency(inv.Money.Currency)
	if err != nil {
		return nil, err
	}
	total, err := pricing.ParseDecimal(inv.Money.Total)
	if err != nil {
		return nil, fmt.Errorf("credits: invoice total: %w", err)
	}
	burns, _, err := pricing.Burn(cur, total, usable)
	if err != nil {
		return nil, err
	}
	out := make([]InvoiceCredit, len(burns))
	for i, b := range burns {
		left, err := pricing.Sub(byID[b.ID].balance, b.Amount)
		if err == nil {
			left, err = cur.Amount(left)
		}
		if err != nil {
			return nil, fmt.Errorf("credits: grant %s: %w", b.ID, err)
		}
		out[i] = InvoiceCredit{Grant: b.ID, Invoice: inv.ID, Amount: b.Amount.String(), Balance: left.String()}
	}
	return out, nil
}

// setCredits puts what grants gave inv on it: the credits applied and the
// amount due. An invoice no grant paid keeps neither.
func setCredits(inv *Invoice, credits []InvoiceCredit) error {
	inv.Credits, inv.Money.Credits, inv.Money.AmountDue = nil, "", ""
	if len(credits) == 0 {
		return nil
	}
	cur, err := pricing.ParseCurrency(inv.Money.Currency)
	if err != nil {
		return err
	}
	sum := pricing.NewDecimal(0, 0)
	for _, c := range credits {
		amt, err := pricing.ParseDecimal(c.Amount)
		if err == nil {
			sum, err = pricing.Add(sum, amt)
		}
		if err != nil {
			return fmt.Errorf("invoice %d: credit of grant %s: %w", inv.ID, c.Grant, err)
		}
	}
	total, err := pricing.ParseDecimal(inv.Money.Total)
	if err != nil {
		return fmt.Errorf("invoice %d: total: %w", inv.ID, err)
	}
	due, err := pricing.Sub(total, sum)
	if err != nil {
		return err
	}
	if sum, err = cur.Amount(sum); err != nil {
		return err
	}
	if due, err = cur.Amount(due); err != nil {
		return err
	}
	inv.Credits, inv.Money.Credits, inv.Money.AmountDue = credits, sum.String(), due.String()
	return nil
}

// creditStore is what a close reads and writes of the credit ledger.
type creditStore interface {
	CreditEntries(ctx context.Context, f schema.CreditFilter) ([]schema.CreditEntry, error)
	LastCredit(ctx context.Context) (schema.CreditEntry, error)
	InsertCreditEntry(ctx context.Context, e schema.CreditEntry) error
}

// closeCredits is the credit ledger as one close sees it: the entries
// recorded before its cutoff, by customer, and the chain's end its burns
// link to.
type closeCredits struct {
	byCustomer map[string][]schema.CreditEntry
	last       schema.CreditEntry
}

// readCloseCredits reads the credit ledger for a close of scope ("" all
// customers) at cutoff.
func readCloseCredits(ctx context.Context, tx creditStore, scope string, last schema.CreditEntry, cutoff int64) (*closeCredits, error) {
	es, err := tx.CreditEntries(ctx, schema.CreditFilter{Customer: scope, Before: cutoff})
	if errors.Is(err, schema.ErrNoCredits) && last.ID == 0 {
		es, err = nil, nil // a read-only preview of a database from before credits
	}
	if err != nil {
		return nil, fmt.Errorf("close: read credits: %w", err)
	}
	cc := &closeCredits{byCustomer: map[string][]schema.CreditEntry{}, last: last}
	for _, e := range es {
		cc.byCustomer[e.Customer] = append(cc.byCustomer[e.Customer], e)
	}
	return cc, nil
}

// apply puts what the customer's grants give inv on it.
func (cc *closeCredits) apply(inv *Invoice) error {
	credits, err := creditsFor(inv, cc.byCustomer[inv.Customer])
	if err != nil {
		return err
	}
	return setCredits(inv, credits)
}

// burn appends inv's burns to the credit chain, recorded at the close's
// cutoff, in the close's transaction.
func (cc *closeCredits) burn(ctx context.Context, tx creditStore, inv *Invoice) error {
	for _, c := range inv.Credits {
		e := schema.CreditEntry{ID: cc.last.ID + 1, Kind: CreditBurned, GrantID: c.Grant, Customer: inv.Customer,
			Currency: inv.Money.Currency, Amount: c.Amount, Balance: c.Balance, InvoiceID: inv.ID,
			Reason: "invoice " + fmt.Sprint(inv.ID) + " (" + inv.Period + ")", RecordedAt: inv.Cutoff, PrevHash: cc.last.RowHash}
		e.RowHash = e.Hash(e.PrevHash)
		if err := tx.InsertCreditEntry(ctx, e); err != nil {
			return fmt.Errorf("close: %w", err)
		}
		cc.last = e
	}
	return nil
}

// LinkCredit links e (its ID and RecordedAt aside) to last, the chain's
// end: the next id, a recorded time never before last's, and its hashes.
func LinkCredit(e *schema.CreditEntry, last schema.CreditEntry) {
	e.ID = last.ID + 1
	e.RecordedAt = max(e.RecordedAt, last.RecordedAt)
	e.PrevHash = last.RowHash
	e.RowHash = e.Hash(e.PrevHash)
}

// invoiceCredits reads the burns of invoices fromID..toID, by invoice.
func invoiceCredits(ctx context.Context, src creditReader, fromID, toID int64) (map[int64][]InvoiceCredit, error) {
	es, err := src.CreditEntries(ctx, schema.CreditFilter{FromInvoice: fromID, ToInvoice: toID})
	if errors.Is(err, schema.ErrNoCredits) {
		return nil, nil // a database from before credits: none
	}
	if err != nil {
		return nil, err
	}
	out := map[int64][]InvoiceCredit{}
	for _, e := range es {
		out[e.InvoiceID] = append(out[e.InvoiceID], InvoiceCredit{Grant: e.GrantID, Invoice: e.InvoiceID, Amount: e.Amount, Balance: e.Balance})
	}
	return out, nil
}

// creditReader reads credit entries.
type creditReader interface {
	CreditEntries(ctx context.Context, f schema.CreditFilter) ([]schema.CreditEntry, error)
}

// Grants are the grants of customer ("" every customer's) and where each
// stands now: the credits views (credits list and show, GET
// /v1/customers/{id}/credits). A grant past its expiry whose expiry row is
// not written yet shows expired with its balance as it was.
func Grants(ctx context.Context, src creditReader, customer string, now int64) ([]*Grant, error) {
	es, err := src.CreditEntries(ctx, schema.CreditFilter{Customer: customer})
	if err != nil {
		return nil, err
	}
	grants, err := GrantsOf(es)
	if err != nil {
		return nil, err
	}
	for _, g := range grants {
		g.viewAt(now)
	}
	return grants, nil
}

// viewAt sets the status the views show at now: expired once the expiry
// has passed (before its row is written), scheduled before it takes
// effect, spent when it has nothing left.
func (g *Grant) viewAt(now int64) {
	switch {
	case g.Status != "active":
	case g.ExpiresAt != 0 && g.ExpiresAt <= now:
		g.Status = "expired"
	case g.EffectiveAt > now:
		g.Status = "scheduled"
	case g.balance.Sign() == 0:
		g.Status = "spent"
	}
}

// GrantView is a grant's row just written (or found, a duplicate) as the
// views show it at now; nil if the row is not a grant's.
func GrantView(e schema.CreditEntry, now int64) *Grant {
	gs, err := GrantsOf([]schema.CreditEntry{e})
	if err != nil || len(gs) == 0 {
		return nil
	}
	gs[0].viewAt(now)
	return gs[0]
}

// Due lists the grants in grants whose expiry has passed at now with no
// expiry row yet: the expiry rows to write, each forfeiting what the grant
// has left.
func Due(grants []*Grant, now int64) []*Grant {
	var out []*Grant
	for _, g := range grants {
		if g.Status == "active" && g.ExpiresAt != 0 && g.ExpiresAt <= now {
			out = append(out, g)
		}
	}
	return out
}

// verifyCredits walks the credit chain (each row's hash and link), replays
// every grant's balance against the stored ones, and recomputes what each
// closed invoice's grants gave it against its stored burns. An incremental
// verify walks the chain from the anchored entry, replays the grants the
// entries from there touch (their whole history: a grant's balance is
// never stored apart from its entries), and recomputes the invoices of the
// closes after the closes anchor.
func verifyCredits(ctx context.Context, db VerifySource, s ledger.Since) (ledger.CheckResult, error) {
	c := ledger.CheckResult{Name: "credits", From: s.From(s.Rows(ledger.ChainCredits, "from"), "the invoices of "+s.Rows(ledger.ChainCloses, "after"))}
	es, err := db.CreditEntries(ctx, schema.CreditFilter{AfterID: max(s.Credits-1, 0)})
	if errors.Is(err, schema.ErrNoCredits) {
		c.Skipped = err.Error()
		return c, nil
	}
	if err != nil {
		return c, err
	}
	prev := chainhash.Genesis
	if s.Credits > 0 {
		_, hash, ok, err := db.HashBefore(ctx, "credit_entries", s.Credits)
		if err != nil {
			return c, err
		}
		if ok {
			prev = hash
		}
	}
	for i := range es {
		e := &es[i]
		c.Checked++
		if !bytes.Equal(e.PrevHash, prev) {
			c.Add(ledger.Problem{Table: "credit_entries", ID: e.ID, Msg: "prev_hash does not link to the entry before it (an entry was deleted, inserted or edited)"})
		}
		if !bytes.Equal(e.Hash(e.PrevHash), e.RowHash) {
			c.Add(ledger.Problem{Table: "credit_entries", ID: e.ID, Msg: "row_hash does not match the entry's contents (edited)"})
		}
		prev = e.RowHash
	}
	replayed, customerEntries := es, creditsByCustomer(es)
	if s.Incremental {
		if replayed, err = grantHistories(ctx, db, es); err != nil {
			return c, err
		}
		customerEntries = func(customer string) ([]schema.CreditEntry, error) {
			return db.CreditEntries(ctx, schema.CreditFilter{Customer: customer})
		}
	}
	_, problems := foldCredits(replayed)
	for _, p := range problems {
		c.Add(p)
	}
	invs, err := listInvoices(ctx, db, InvoiceFilter{AfterClose: s.Closes}, false)
	if err != nil {
		return c, err
	}
	known := map[int64]bool{}
	for i := range invs {
		inv := &invs[i]
		known[inv.ID] = true
		mine, err := customerEntries(inv.Customer)
		if err != nil {
			return c, err
		}
		var before []schema.CreditEntry
		for _, e := range mine {
			if e.RecordedAt < inv.Cutoff {
				before = append(before, e)
			}
		}
		want, err := creditsFor(inv, before)
		if err != nil {
			c.Add(ledger.Problem{Table: "invoices", ID: inv.ID, Msg: err.Error()})
			continue
		}
		if !slices.Equal(want, inv.Credits) {
			c.Add(ledger.Problem{Table: "invoices", ID: inv.ID, Msg: fmt.Sprintf("credits recomputed from the grants: %s; stored burns: %s",
				creditList(want), creditList(inv.Credits))})
		}
	}
	for _, e := range es {
		if e.Kind != CreditBurned || known[e.InvoiceID] {
			continue
		}
		if s.Incremental { // an invoice of an earlier close
			_, err := db.GetInvoice(ctx, e.InvoiceID)
			if err == nil {
				continue
			}
			if !errors.Is(err, schema.ErrNotFound) {
				return c, err
			}
		}
		c.Add(ledger.Problem{Table: "credit_entries", ID: e.ID, Msg: fmt.Sprintf("burn of grant %s for invoice %d, which does not exist", e.GrantID, e.InvoiceID)})
	}
	return c, nil
}

// creditsByCustomer reads a customer's entries from es, every entry.
func creditsByCustomer(es []schema.CreditEntry) func(string) ([]schema.CreditEntry, error) {
	by := map[string][]schema.CreditEntry{}
	for _, e := range es {
		by[e.Customer] = append(by[e.Customer], e)
	}
	return func(customer string) ([]schema.CreditEntry, error) { return by[customer], nil }
}

func creditList(cs []InvoiceCredit) string {
	if len(cs) == 0 {
		return "none"
	}
	s := ""
	for i, c := range cs {
		if i > 0 {
			s += ", "
		}
		s += c.Grant + " " + c.Amount
	}
	return s
}

// GrantRequest is a credit grant as an operator asks for it (credits
// grant, POST /v1/customers/{id}/credits).
type GrantRequest struct {
	// ID is the grant's idempotency key: a repeat with the same id and the
	// same grant is a duplicate, with another grant refused ("": a new id).
	ID       string
	Customer string
	Currency string
	Amount   string
	Category string // paid (default) | promotional
	Priority int64  // lower pays first; default DefaultCreditPriority
	// EffectiveAt is when the grant starts (unix ms; 0: when it is
	// recorded), ExpiresAt when it ends (0: never).
	EffectiveAt, ExpiresAt int64
	Reason, Actor          string
}

// DefaultCreditPriority is a grant's priority when none is given (Stripe's
// default too): a grant given a lower one pays before it.
const DefaultCreditPriority = 50

// MaxCreditPriority bounds a grant's priority.
const MaxCreditPriority = 1000

// ErrBadGrant wraps what makes a credit grant, or its void, invalid.
var ErrBadGrant = errors.New("invalid credit grant")

// Entry is the grant's row as it would be written at now (unlinked), or
// why it cannot be.
func (r GrantRequest) Entry(now int64) (schema.CreditEntry, error) {
	bad := func(format string, args ...any) (schema.CreditEntry, error) {
		return schema.CreditEntry{}, fmt.Errorf("%w: %s", ErrBadGrant, fmt.Sprintf(format, args...))
	}
	if r.Customer == "" {
		return bad("no customer")
	}
	if err := ledger.CheckIdentifier(r.Customer); err != nil {
		return bad("customer %q %v", r.Customer, err)
	}
	if err := ledger.CheckIdentifier(r.ID); err != nil {
		return bad("id %q %v", r.ID, err)
	}
	cur, err := pricing.ParseCurrency(r.Currency)
	if err != nil {
		return bad("currency: %v", err)
	}
	amt, err := cur.CreditAmount(r.Amount)
	if err != nil {
		return bad("%v", err)
	}
	switch r.Category {
	case "":
		r.Category = "paid"
	case "paid", "promotional":
	default:
		return bad("category %q: want paid or promotional", r.Category)
	}
	if r.Priority < 0 || r.Priority > MaxCreditPriority {
		return bad("priority %d: want 0 to %d (lower pays first)", r.Priority, MaxCreditPriority)
	}
	effective := r.EffectiveAt
	if effective == 0 {
		effective = now
	}
	if r.ExpiresAt != 0 && r.ExpiresAt <= now {
		return bad("it expires (%s) before now", rfc3339(r.ExpiresAt))
	}
	if r.ExpiresAt != 0 && r.ExpiresAt <= effective {
		return bad("it expires (%s) before it takes effect (%s)", rfc3339(r.ExpiresAt), rfc3339(effective))
	}
	if strings.TrimSpace(r.Reason) == "" {
		return bad("a reason is required: say why the customer is granted credit")
	}
	if strings.TrimSpace(r.Actor) == "" {
		return bad("an actor is required: say who grants it")
	}
	if err := ledger.CheckTexts(ledger.Text{Field: "reason", Value: r.Reason}, ledger.Text{Field: "actor", Value: r.Actor}); err != nil {
		return bad("%v", err)
	}
	return schema.CreditEntry{Kind: CreditGranted, GrantID: r.ID, Customer: r.Customer, Currency: cur.String(),
		Amount: amt.String(), Balance: amt.String(), Category: r.Category, Priority: r.Priority,
		EffectiveAt: effective, ExpiresAt: r.ExpiresAt, Reason: r.Reason, Actor: r.Actor, RecordedAt: now}, nil
}

// SameGrant reports whether stored is the grant r asks for: a repeat of
// its id with the same body. An EffectiveAt of 0 (from when it was
// recorded) matches the stored one.
func (r GrantRequest) SameGrant(stored schema.CreditEntry) bool {
	want, err := r.Entry(stored.RecordedAt)
	if err != nil {
		return false
	}
	if r.EffectiveAt == 0 {
		want.EffectiveAt = stored.EffectiveAt
	}
	return want.Customer == stored.Customer && want.Currency == stored.Currency && want.Amount == stored.Amount &&
		want.Category == stored.Category && want.Priority == stored.Priority && want.EffectiveAt == stored.EffectiveAt &&
		want.ExpiresAt == stored.ExpiresAt && want.Reason == stored.Reason && want.Actor == stored.Actor
}

func rfc3339(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) }

// GrantsOf replays entries (in id order) into their grants, or says which
// entry does not add up (verify tells more).
func GrantsOf(entries []schema.CreditEntry) ([]*Grant, error) {
	grants, problems := foldCredits(entries)
	if len(problems) > 0 {
		return nil, fmt.Errorf("credits: %w (run hookledger verify)", problems[0])
	}
	return grants, nil
}

// ZeroIn is zero written with currency's places ("0.00" USD).
func ZeroIn(currency string) string {
	cur, err := pricing.ParseCurrency(currency)
	if err != nil {
		return "0"
	}
	z, _ := cur.Amount(pricing.NewDecimal(0, 0))
	return z.String()
}

// NewGrantID is the id of a grant asked for without one: "grant_" and 16
// random hex digits.
func NewGrantID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on the platforms Go supports
	}
	return "grant_" + hex.EncodeToString(b[:])
}

// MarshalJSON shows the grant's times in RFC 3339 (UTC); expires_at is
// null for a grant that never expires.
func (g Grant) MarshalJSON() ([]byte, error) {
	type fields Grant // Grant's own fields, without this method
	var expires *string
	if g.ExpiresAt != 0 {
		s := rfc3339(g.ExpiresAt)
		expires = &s
	}
	return json.Marshal(struct {
		fields
		EffectiveAt string  `json:"effective_at"`
		ExpiresAt   *string `json:"expires_at"`
		RecordedAt  string  `json:"recorded_at"`
	}{fields(g), rfc3339(g.EffectiveAt), expires, rfc3339(g.RecordedAt)})
}

// CreditStanding is a customer's credit at one instant (GET
// /v1/customers/{id}/credits): each grant with what it has left, what the
// open period's usage would draw from it if the period closed now (the
// burns of its draft invoice, from the preview's own pricing), and what
// would remain; and the same summed per currency, over the grants that are
// active.
type CreditStanding struct {
	Customer   string           `json:"customer"`
	At         string           `json:"at"`     // RFC 3339
	Period     string           `json:"period"` // the open period drawn from ("" when no draft)
	Currencies []CurrencyCredit `json:"currencies"`
	Grants     []GrantStanding  `json:"grants"`
}

// CurrencyCredit is one currency's active credit of a customer.
type CurrencyCredit struct {
	Currency  string `json:"currency"`
	Balance   string `json:"balance"`   // what the active grants have left
	Drawn     string `json:"drawn"`     // what the open period's draft would take
	Available string `json:"available"` // balance − drawn
}

// GrantStanding is one grant in a CreditStanding.
type GrantStanding struct {
	Grant     *Grant `json:"grant"`
	Drawn     string `json:"drawn"`
	Available string `json:"available"`
}

// Standing is customer's credit at now, drawn by drafts (the open
// period's draft invoices, from Preview: the customer's and any of late
// usage in another currency; none or nil: nothing drawn).
func Standing(ctx context.Context, src creditReader, customer string, now time.Time, drafts ...*Invoice) (*CreditStanding, error) {
	grants, err := Grants(ctx, src, customer, now.UnixMilli())
	if err != nil {
		return nil, err
	}
	st := &CreditStanding{Customer: customer, At: now.UTC().Format(time.RFC3339), Currencies: []CurrencyCredit{}, Grants: []GrantStanding{}}
	drawn := map[string]pricing.Decimal{}
	for _, draft := range drafts {
		if draft == nil {
			continue
		}
		st.Period = draft.Period
		for _, c := range draft.Credits {
			d, err := pricing.ParseDecimal(c.Amount)
			if err == nil {
				drawn[c.Grant], err = pricing.Add(drawn[c.Grant], d)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	type sums struct{ balance, drawn pricing.Decimal }
	byCur := map[string]*sums{}
	var order []string
	for _, g := range grants {
		bal, d := g.balance, drawn[g.ID]
		if g.Status != "active" {
			bal = pricing.NewDecimal(0, 0)
		}
		avail, err := pricing.Sub(bal, d)
		if err == nil {
			avail, err = g.cur.Amount(avail)
		}
		if err != nil {
			return nil, fmt.Errorf("credits: grant %s: %w", g.ID, err)
		}
		dd, _ := g.cur.Amount(d)
		st.Grants = append(st.Grants, GrantStanding{Grant: g, Drawn: dd.String(), Available: avail.String()})
		if g.Status != "active" {
			continue
		}
		s := byCur[g.Currency]
		if s == nil {
			s = &sums{pricing.NewDecimal(0, 0), pricing.NewDecimal(0, 0)}
			byCur[g.Currency], order = s, append(order, g.Currency)
		}
		if s.balance, err = pricing.Add(s.balance, bal); err != nil {
			return nil, err
		}
		if s.drawn, err = pricing.Add(s.drawn, d); err != nil {
			return nil, err
		}
	}
	slices.Sort(order)
	for _, code := range order {
		s := byCur[code]
		cur, err := pricing.ParseCurrency(code)
		if err != nil {
			return nil, err
		}
		avail, err := pricing.Sub(s.balance, s.drawn)
		if err != nil {
			return nil, err
		}
		b, _ := cur.Amount(s.balance)
		d, _ := cur.Amount(s.drawn)
		a, _ := cur.Amount(avail)
		st.Currencies = append(st.Currencies, CurrencyCredit{Currency: code, Balance: b.String(), Drawn: d.String(), Available: a.String()})
	}
	return st, nil
}
