-- Billing sync to Stripe (docs/stripe.md). A push is one meter event sent to
-- Stripe's POST /v1/billing/meter_events: in stream mode one per ledger row
-- of a meter with stripe settings, written in the transaction that appends
-- the row; in close mode one per invoice line, written by the close. Each
-- push has an outbox row (destination "stripe"), so the forwarding relay
-- delivers it at least once under its identifier, or leaves it dead, visible
-- until an operator retries it.
--
-- A push keeps the running totals of its customer, meter and period (total:
-- the ledger's quantity, pushed: the whole numbers sent), so the next push
-- carries the remainder and the sum pushed is the ledger's total, rounded
-- once, to the unit. Pushes are appended, never edited.

CREATE TABLE stripe_pushes (
    id              INTEGER PRIMARY KEY,
    identifier      TEXT    NOT NULL,  -- Stripe's meter event identifier, derived from the ledger (at most 100 characters)
    source          TEXT    NOT NULL CHECK (source = 'usage' OR source = 'adjustment' OR source = 'line'),
    ledger_id       INTEGER,           -- the metered_usage row (stream)
    invoice_id      INTEGER,           -- the invoice line (close)
    line_no         INTEGER,
    customer_id     TEXT    NOT NULL,
    meter           TEXT    NOT NULL,
    event_name      TEXT    NOT NULL,
    stripe_customer TEXT    NOT NULL DEFAULT '',  -- '': the customer's link (customers link), read when sent
    period_start    INTEGER NOT NULL,  -- the period the running totals are kept for (unix ms)
    quantity        TEXT    NOT NULL,  -- the ledger quantity this push covers (exact decimal)
    total           TEXT    NOT NULL,  -- the period's ledger total, this push included
    value           TEXT    NOT NULL,  -- the whole number sent
    pushed          TEXT    NOT NULL,  -- the period's sum of values, this push included
    timestamp       INTEGER NOT NULL,  -- the event time sent (unix seconds)
    created_at      INTEGER NOT NULL,
    UNIQUE (identifier)
);
CREATE INDEX stripe_pushes_carry ON stripe_pushes (customer_id, meter, period_start, id);

CREATE TRIGGER stripe_pushes_no_update BEFORE UPDATE ON stripe_pushes
BEGIN
    SELECT RAISE(ABORT, 'a push is appended, never edited');
END;

-- The outbox carries pushes too: a message is a receipt's (forwarding) or a
-- push's (Stripe). SQLite cannot drop a NOT NULL, so the table is rebuilt
-- with every row and id (foreign keys are off while migrations run).
CREATE TABLE outbox_new (
    id              INTEGER PRIMARY KEY,
    receipt_id      INTEGER REFERENCES receipts (id) ON DELETE CASCADE,  -- a forwarded event's message
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
    push_id         INTEGER REFERENCES stripe_pushes (id),  -- or a push's (last: the columns before keep their places)
    CHECK ((receipt_id IS NULL) != (push_id IS NULL)),
    UNIQUE (message_id),
    UNIQUE (receipt_id, destination)
);
INSERT INTO outbox_new (id, receipt_id, destination, message_id, status, attempts, created_at, pending_since,
    next_attempt_at, last_attempt_at, delivered_at, last_status, last_error)
    SELECT id, receipt_id, destination, message_id, status, attempts, created_at, pending_since,
    next_attempt_at, last_attempt_at, delivered_at, last_status, last_error FROM outbox;
DROP TABLE outbox;
ALTER TABLE outbox_new RENAME TO outbox;
CREATE INDEX outbox_due ON outbox (destination, status, next_attempt_at, pending_since);
CREATE UNIQUE INDEX outbox_push ON outbox (push_id) WHERE push_id IS NOT NULL;
