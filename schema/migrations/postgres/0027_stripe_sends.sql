-- How pushes reach Stripe, as SQLite's 0027 (its comments are there).
CREATE TABLE stripe_sends (
    push_id    BIGINT   PRIMARY KEY REFERENCES stripe_pushes (id),
    identifier TEXT     NOT NULL,
    value      TEXT     NOT NULL,
    pushes     BIGINT   NOT NULL,
    timestamp  BIGINT   NOT NULL,
    carried    INTEGER  NOT NULL DEFAULT 0,
    created_at BIGINT   NOT NULL
);
CREATE INDEX stripe_sends_identifier ON stripe_sends (identifier);
CREATE INDEX stripe_sends_carried ON stripe_sends (timestamp) WHERE carried = 1;
