-- What Stripe reports back about the pushes (docs/stripe.md). Stripe sends
-- v1.billing.meter.error_report_triggered and v1.billing.meter.no_meter_found
-- when meter events it had accepted fail its asynchronous checks; each
-- sample error of such an event is a report, written in the transaction
-- that takes the event into custody (its receipt), and linked to the push
-- it names by the meter event's identifier when the sample carries one.
-- Reports are appended, never edited: a push's state is its outbox
-- message's and the reports that name it.

CREATE TABLE stripe_reports (
    id          INTEGER PRIMARY KEY,
    receipt_id  INTEGER NOT NULL REFERENCES receipts (id) ON DELETE CASCADE,  -- the Stripe event
    event_type  TEXT    NOT NULL,
    meter       TEXT    NOT NULL DEFAULT '',  -- the Stripe meter the event names (mtr_…; '' for none)
    code        TEXT    NOT NULL DEFAULT '',  -- the error type's code (meter_event_customer_not_found, …)
    message     TEXT    NOT NULL DEFAULT '',  -- the sample's error message
    identifier  TEXT    NOT NULL DEFAULT '',  -- the meter event's identifier, when the sample names it
    push_id     INTEGER REFERENCES stripe_pushes (id),  -- the push of that identifier; NULL: none of ours
    created_at  INTEGER NOT NULL
);
CREATE INDEX stripe_reports_push ON stripe_reports (push_id) WHERE push_id IS NOT NULL;
CREATE INDEX stripe_reports_created ON stripe_reports (created_at);

CREATE TRIGGER stripe_reports_no_update BEFORE UPDATE ON stripe_reports
BEGIN
    SELECT RAISE(ABORT, 'a Stripe report is appended, never edited');
END;
