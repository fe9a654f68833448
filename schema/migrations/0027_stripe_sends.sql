-- How pushes reach Stripe (docs/stripe.md). The relay no longer sends one
-- meter event per push: the pushes of a customer, meter and period it finds
-- pending together become one meter event carrying the sum of their values,
-- and a push whose own time is outside Stripe's window (more than 35 days
-- old, or more than 5 minutes ahead: a credit to a closed month, late usage,
-- a replay) is sent stamped with the time it was first sent, counted in that
-- Stripe period ("carried"), instead of being dead for its age.
--
-- A send is written before its request, in a writer transaction of its own,
-- one row per push it carries: a retry, or a restart after a kill, sends the
-- same meter event under the same identifier, so Stripe deduplicates it. A
-- push sent alone keeps its own identifier. The time a send carries may be
-- moved to now when it is sent again after Stripe's window has passed it
-- (timestamp, carried): nothing else of a send changes.
CREATE TABLE stripe_sends (
    push_id    INTEGER PRIMARY KEY REFERENCES stripe_pushes (id),
    identifier TEXT    NOT NULL,            -- the meter event's identifier (the push's own when it is sent alone)
    value      TEXT    NOT NULL,            -- the whole number the meter event carries: the sum of its pushes' values
    pushes     INTEGER NOT NULL,            -- how many pushes it carries
    timestamp  INTEGER NOT NULL,            -- the event time it is sent with (unix seconds)
    carried    INTEGER NOT NULL DEFAULT 0,  -- 1: its pushes' own time was outside Stripe's window; timestamp is when it was sent
    created_at INTEGER NOT NULL
);
CREATE INDEX stripe_sends_identifier ON stripe_sends (identifier);
CREATE INDEX stripe_sends_carried ON stripe_sends (timestamp) WHERE carried = 1;
