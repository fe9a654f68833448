-- What Stripe says became of the invoices it made from close-mode pushes
-- (docs/stripe.md). Stripe's invoice.finalized, invoice.paid and
-- invoice.payment_failed events, received by a provider with the stripe
-- scheme, are each kept as one row per hookledger invoice they bill, written
-- in the transaction that takes the event into custody (its receipt). An
-- invoice is billed by a Stripe invoice when the Stripe invoice's customer
-- maps to the invoice's customer and one of its close-mode pushes has a
-- timestamp inside a period the Stripe invoice carries; an event that bills
-- no invoice is kept once, with invoice_id NULL, and shown as unlinked.
--
-- Rows are appended, never edited: an invoice's state is that of its row with
-- the latest event_created (Stripe's event time, so events delivered out of
-- order show the state Stripe reached last), and every event stays.

CREATE TABLE stripe_invoice_states (
    id              INTEGER PRIMARY KEY,
    receipt_id      INTEGER NOT NULL REFERENCES receipts (id) ON DELETE CASCADE,  -- the Stripe event
    stripe_event    TEXT    NOT NULL,  -- evt_…
    event_type      TEXT    NOT NULL,  -- invoice.finalized, invoice.paid or invoice.payment_failed
    state           TEXT    NOT NULL CHECK (state = 'invoiced' OR state = 'paid' OR state = 'payment_failed'),
    event_created   INTEGER NOT NULL,  -- the event's created (unix seconds, Stripe's clock)
    stripe_invoice  TEXT    NOT NULL DEFAULT '',  -- in_…
    stripe_customer TEXT    NOT NULL DEFAULT '',  -- cus_…
    period_start    INTEGER NOT NULL DEFAULT 0,   -- the earliest start of the periods it carries (unix seconds)
    period_end      INTEGER NOT NULL DEFAULT 0,   -- the latest end
    invoice_id      INTEGER REFERENCES invoices (id),  -- the hookledger invoice it bills; NULL: none
    created_at      INTEGER NOT NULL
);
CREATE INDEX stripe_invoice_states_invoice ON stripe_invoice_states (invoice_id, event_created, id) WHERE invoice_id IS NOT NULL;
CREATE INDEX stripe_invoice_states_created ON stripe_invoice_states (created_at);
-- Linking reads the close-mode pushes of a customer (or of a Stripe
-- customer) by timestamp in the writer's transaction, the invoice pages
-- whether an invoice has pushes, and a void the push of the row it voids:
-- none of them scans the pushes.
CREATE INDEX stripe_pushes_line ON stripe_pushes (customer_id, timestamp) WHERE invoice_id IS NOT NULL;
CREATE INDEX stripe_pushes_line_stripe ON stripe_pushes (stripe_customer, timestamp) WHERE invoice_id IS NOT NULL;
CREATE INDEX stripe_pushes_invoice ON stripe_pushes (invoice_id) WHERE invoice_id IS NOT NULL;
CREATE INDEX stripe_pushes_ledger ON stripe_pushes (ledger_id) WHERE ledger_id IS NOT NULL;

CREATE TRIGGER stripe_invoice_states_no_update BEFORE UPDATE ON stripe_invoice_states
BEGIN
    SELECT RAISE(ABORT, 'a Stripe invoice state is appended, never edited');
END;

-- A void of a row whose push Stripe took less than 24 hours ago cancels
-- that push's meter event (POST /v1/billing/meter_event_adjustments,
-- type=cancel) instead of sending the compensating value: cancels names the
-- identifier it cancels ('': a meter event). Added with its default, so
-- every push before keeps its meaning.
ALTER TABLE stripe_pushes ADD COLUMN cancels TEXT NOT NULL DEFAULT '';
