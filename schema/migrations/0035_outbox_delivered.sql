-- forward status counted each destination's delivered messages through the
-- outbox's index: 0.7 s of its 0.8 s at 10,000,000 messages (issue 42,
-- status at scale). The count is kept here as messages change state, by
-- triggers, so whatever delivers or deletes a message (the relay,
-- retention's prune, a receipt's cascade) counts. No message is inserted
-- delivered, so the webhook path's outbox insert has no trigger; the relay's
-- update of a delivered message adds one upsert. SQLite only (PostgreSQL's
-- 0035 says why).
CREATE TABLE outbox_delivered (
    destination TEXT    PRIMARY KEY,
    messages    INTEGER NOT NULL
);

INSERT INTO outbox_delivered (destination, messages)
    SELECT destination, COUNT(*) FROM outbox WHERE status = 'delivered' GROUP BY destination;

CREATE TRIGGER outbox_delivered_status AFTER UPDATE OF status ON outbox
    WHEN (OLD.status = 'delivered') != (NEW.status = 'delivered')
BEGIN
    INSERT INTO outbox_delivered (destination, messages)
        VALUES (NEW.destination, CASE WHEN NEW.status = 'delivered' THEN 1 ELSE -1 END)
        ON CONFLICT (destination) DO UPDATE SET messages = messages + excluded.messages;
END;

CREATE TRIGGER outbox_delivered_delete AFTER DELETE ON outbox WHEN OLD.status = 'delivered'
BEGIN
    UPDATE outbox_delivered SET messages = messages - 1 WHERE destination = OLD.destination;
END;
