-- Each destination's delivered messages, counted as they change state (as
-- SQLite's 0035; its comments are there). Several receivers' relays record
-- deliveries at once, so a destination's count is the sum of one row per
-- server backend (pg_backend_pid()): a backend runs one transaction at a
-- time, so no transaction ever waits for another's row, and none can
-- deadlock over two destinations' rows taken in opposite orders.
CREATE TABLE outbox_delivered (
    destination TEXT    COLLATE "C" NOT NULL,
    backend     INTEGER NOT NULL,
    messages    BIGINT  NOT NULL,
    PRIMARY KEY (destination, backend)
);

INSERT INTO outbox_delivered (destination, backend, messages)
    SELECT destination, 0, COUNT(*) FROM outbox WHERE status = 'delivered' GROUP BY destination;

CREATE FUNCTION outbox_delivered_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO outbox_delivered (destination, backend, messages) VALUES (OLD.destination, pg_backend_pid(), -1)
            ON CONFLICT (destination, backend) DO UPDATE SET messages = outbox_delivered.messages - 1;
    ELSE
        INSERT INTO outbox_delivered (destination, backend, messages)
            VALUES (NEW.destination, pg_backend_pid(), CASE WHEN NEW.status = 'delivered' THEN 1 ELSE -1 END)
            ON CONFLICT (destination, backend) DO UPDATE SET messages = outbox_delivered.messages + EXCLUDED.messages;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER outbox_delivered_status AFTER UPDATE OF status ON outbox FOR EACH ROW
    WHEN ((OLD.status = 'delivered') IS DISTINCT FROM (NEW.status = 'delivered'))
    EXECUTE FUNCTION outbox_delivered_count();

CREATE TRIGGER outbox_delivered_delete AFTER DELETE ON outbox FOR EACH ROW
    WHEN (OLD.status = 'delivered')
    EXECUTE FUNCTION outbox_delivered_count();
