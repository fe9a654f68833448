-- Invoices to Stripe (docs/stripe.md, stripe.invoices). When a close makes a
-- priced invoice whose total is above zero, it writes, in its own
-- transaction, the invoice's push: the Stripe invoice to create, with one
-- invoice item per priced line, the fee and the minimum's true-up, each in
-- the currency's minor units, frozen as the invoice is. Its outbox message
-- (destination "stripe-invoices") makes the relay create the invoice once:
-- every request carries an idempotency key derived from the invoice's
-- digest, and before creating anything the relay looks for an invoice that
-- an earlier attempt created, by its metadata (Stripe keeps idempotency keys
-- for 24 hours only). Pushes are appended, never edited.
CREATE TABLE stripe_invoice_pushes (
    id                INTEGER PRIMARY KEY,
    invoice_id        INTEGER NOT NULL REFERENCES invoices (id),
    identifier        TEXT    NOT NULL,  -- hl_…, derived from the invoice's digest: the root of every idempotency key
    customer_id       TEXT    NOT NULL,
    stripe_customer   TEXT    NOT NULL DEFAULT '',  -- '': the customer's link (customers link), read when sent
    currency          TEXT    NOT NULL,  -- ISO 4217, upper case
    total             TEXT    NOT NULL,  -- the invoice's total (exact decimal)
    total_minor       TEXT    NOT NULL,  -- the same in the currency's minor units (a whole number)
    items             TEXT    NOT NULL,  -- JSON: the invoice items to create, in order
    collection_method TEXT    NOT NULL CHECK (collection_method = 'charge_automatically' OR collection_method = 'send_invoice'),
    days_until_due    INTEGER NOT NULL DEFAULT 0,
    finalize          INTEGER NOT NULL,
    created_at        INTEGER NOT NULL,
    UNIQUE (invoice_id),
    UNIQUE (identifier)
);
CREATE TRIGGER stripe_invoice_pushes_no_update BEFORE UPDATE ON stripe_invoice_pushes
BEGIN
    SELECT RAISE(ABORT, 'an invoice push is appended, never edited');
END;

-- What Stripe answered once the invoice was complete: appended at each
-- delivery (a redelivery after a lost answer appends the same again); the
-- latest is the invoice's.
CREATE TABLE stripe_invoice_results (
    id             INTEGER PRIMARY KEY,
    push_id        INTEGER NOT NULL REFERENCES stripe_invoice_pushes (id),
    stripe_invoice TEXT    NOT NULL,  -- in_…
    number         TEXT    NOT NULL DEFAULT '',
    status         TEXT    NOT NULL DEFAULT '',  -- draft, open, paid, …
    amount_due     TEXT    NOT NULL,  -- minor units, as Stripe said
    currency       TEXT    NOT NULL DEFAULT '',
    hosted_url     TEXT    NOT NULL DEFAULT '',
    created_at     INTEGER NOT NULL
);
CREATE INDEX stripe_invoice_results_push ON stripe_invoice_results (push_id, id);

-- A message is a receipt's (forwarding), a meter push's or an invoice push's
-- (Stripe). SQLite cannot change a CHECK: the table is rebuilt with every row
-- and id (foreign keys are off while migrations run), as 0018 did.
CREATE TABLE outbox_new (
    id              INTEGER PRIMARY KEY,
    receipt_id      INTEGER REFERENCES receipts (id) ON DELETE CASCADE,
    destination     TEXT    NOT NULL,
    message_id      TEXT    NOT NULL,
    status          TEXT    NOT NULL CHECK (status = 'pending' OR status = 'delivered' OR status = 'dead'),
    attempts        INTEGER NOT NULL DEFAULT 0,
    created_at      INTEGER NOT NULL,
    pending_since   INTEGER NOT NULL,
    next_attempt_at INTEGER NOT NULL,
    last_attempt_at INTEGER,
    delivered_at    INTEGER,
    last_status     INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT    NOT NULL DEFAULT '',
    push_id         INTEGER REFERENCES stripe_pushes (id),
    invoice_push_id INTEGER REFERENCES stripe_invoice_pushes (id),
    CHECK ((receipt_id IS NOT NULL) + (push_id IS NOT NULL) + (invoice_push_id IS NOT NULL) = 1),
    UNIQUE (message_id),
    UNIQUE (receipt_id, destination)
);
INSERT INTO outbox_new (id, receipt_id, destination, message_id, status, attempts, created_at, pending_since,
    next_attempt_at, last_attempt_at, delivered_at, last_status, last_error, push_id)
    SELECT id, receipt_id, destination, message_id, status, attempts, created_at, pending_since,
    next_attempt_at, last_attempt_at, delivered_at, last_status, last_error, push_id FROM outbox;
DROP TABLE outbox;
ALTER TABLE outbox_new RENAME TO outbox;
CREATE INDEX outbox_due ON outbox (destination, status, next_attempt_at, pending_since);
CREATE UNIQUE INDEX outbox_push ON outbox (push_id) WHERE push_id IS NOT NULL;
CREATE UNIQUE INDEX outbox_invoice_push ON outbox (invoice_push_id) WHERE invoice_push_id IS NOT NULL;
