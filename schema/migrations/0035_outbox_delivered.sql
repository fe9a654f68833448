-- forward status counted each destination's delivered messages through the
-- outbox's index: 0.7 s of its 0.8 s at 10,000,000 messages (issue 42,
-- status at scale). The count is kept here as messages change state, by
-- triggers, so whatever delivers or deletes a message (the relay,
-- retention's prune, a receipt's cascade) counts. No message is inserted
-- delivered, so the webhook path's outbox insert has no trigger; the relay's
-- update of a delivered message adds one upsert. A destination's count is
-- the sum of its rows: one per database connection that counted (backend,
-- always 0 here), so that on PostgreSQL several receivers' relays never
-- wait on, or deadlock over, one another's row (0035 there).
CREATE TABLE outbox_delivered (
    destination TEXT    NOT NULL,
    backend     INTEGER NOT NULL,
    messages    INTEGER NOT NULL,
    PRIMARY KEY (destination, backend)
);

INSERT INTO outbox_delivered (destination, backend, messages)
    SELECT destination, 0, COUNT(*) FROM outbox WHERE status = 'delivered' GROUP BY destination;

CREATE TRIGGER outbox_delivered_status AFTER UPDATE OF status ON outbox
    WHEN (OLD.status = 'delivered') != (NEW.status = 'delivered')
BEGIN
    INSERT INTO outbox_delivered (destination, backend, messages)
        VALUES (NEW.destination, 0, CASE WHEN NEW.status = 'delivered' THEN 1 ELSE -1 END)
        ON CONFLICT (destination, backend) DO UPDATE SET messages = messages + excluded.messages;
END;

CREATE TRIGGER outbox_delivered_delete AFTER DELETE ON outbox WHEN OLD.status = 'delivered'
BEGIN
    INSERT INTO outbox_delivered (destination, backend, messages) VALUES (OLD.destination, 0, -1)
        ON CONFLICT (destination, backend) DO UPDATE SET messages = messages - 1;
END;
