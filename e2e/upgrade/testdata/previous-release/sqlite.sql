PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL);
INSERT INTO schema_migrations VALUES(1,'0001_custody.sql',1796168982885);
INSERT INTO schema_migrations VALUES(2,'0002_invoices.sql',1796168982887);
INSERT INTO schema_migrations VALUES(3,'0003_reconcile.sql',1796168982891);
INSERT INTO schema_migrations VALUES(4,'0004_equality_checks.sql',1796168982899);
INSERT INTO schema_migrations VALUES(5,'0005_receipt_chain.sql',1796168982905);
INSERT INTO schema_migrations VALUES(6,'0006_custody_guards.sql',1796168982906);
INSERT INTO schema_migrations VALUES(7,'0007_outbox.sql',1796168982906);
INSERT INTO schema_migrations VALUES(8,'0008_api_keys.sql',1796168982909);
INSERT INTO schema_migrations VALUES(9,'0009_first_attempt.sql',1796168982911);
INSERT INTO schema_migrations VALUES(10,'0010_payload_pruned.sql',1796168982912);
INSERT INTO schema_migrations VALUES(11,'0011_customers.sql',1796168982913);
INSERT INTO schema_migrations VALUES(12,'0012_invoice_money.sql',1796168982938);
INSERT INTO schema_migrations VALUES(13,'0013_long_keys.sql',1796168982938);
CREATE TABLE metered_usage (
    id          INTEGER PRIMARY KEY,
    kind        TEXT    NOT NULL CHECK (kind IN ('usage', 'adjustment')),
    provider    TEXT    NOT NULL,
    event_id    TEXT    NOT NULL,
    customer_id TEXT    NOT NULL,
    meter       TEXT    NOT NULL,
    quantity    INTEGER NOT NULL,
    properties  TEXT    NOT NULL DEFAULT '{}',
    reason      TEXT    NOT NULL DEFAULT '',
    ref         TEXT    NOT NULL DEFAULT '',
    occurred_at INTEGER NOT NULL,
    recorded_at INTEGER NOT NULL,
    prev_hash   BLOB    NOT NULL,
    row_hash    BLOB    NOT NULL,
    -- A second line of defence behind receipts: even an event whose receipt was
    -- pruned can never charge the same meter twice.
    UNIQUE (provider, event_id, meter)
);
INSERT INTO metered_usage VALUES(1,'usage','default','probe','cus_0','api_requests',0,'{}','','',1788220800000,1796168983515,X'0000000000000000000000000000000000000000000000000000000000000000',X'5b78848cfa8ace9430a305d88ba736945f960a474906f6fc88e0269a3c338923');
INSERT INTO metered_usage VALUES(2,'usage','default','evt_1','cus_1','api_requests',1200000000,'{}','','',1788429600000,1796168983747,X'5b78848cfa8ace9430a305d88ba736945f960a474906f6fc88e0269a3c338923',X'f44c8b6518447c6dbb2ecd77948481850fce331d0be9f6ea4ffc93b808073c69');
INSERT INTO metered_usage VALUES(3,'usage','default','evt_2','cus_1','api_requests',250000,'{}','','',1788516000000,1796168983941,X'f44c8b6518447c6dbb2ecd77948481850fce331d0be9f6ea4ffc93b808073c69',X'09ac66087bc7b5d4c5e09c3558f315f86d89ba2e8733100011267e1fd0d63c2a');
INSERT INTO metered_usage VALUES(4,'usage','default','evt_3','cus_1','storage_bytes',9223372036854775807,'{}','','',1788602400000,1796168984111,X'09ac66087bc7b5d4c5e09c3558f315f86d89ba2e8733100011267e1fd0d63c2a',X'e8eb3ae7e0458cac9150471a4cbc9cba1bbe6319b8a3bd2d8f1ea400916a6ef4');
INSERT INTO metered_usage VALUES(5,'usage','default','evt_4','cus_2','storage_bytes',1,'{}','','',1788688800000,1796168984436,X'e8eb3ae7e0458cac9150471a4cbc9cba1bbe6319b8a3bd2d8f1ea400916a6ef4',X'5e1132fff397d558ce14b17bff4d007552aeefd44c808f7133eee6f452f8e60c');
INSERT INTO metered_usage VALUES(6,'usage','default','evt_5','cus_2','api_requests',5000000000000000000,'{}','','',1788775200000,1796168984591,X'5e1132fff397d558ce14b17bff4d007552aeefd44c808f7133eee6f452f8e60c',X'89f9d4f74ba68b94999b18a24b13f1fc6d57de6192b2490d6b556b75915ed12e');
INSERT INTO metered_usage VALUES(7,'adjustment','','adj_0c4b507c2a2643ec9aa28a05','cus_1','api_requests',-200000000,'{}','test traffic','event:default/evt_1',1788429600000,1796168985197,X'89f9d4f74ba68b94999b18a24b13f1fc6d57de6192b2490d6b556b75915ed12e',X'01bc9cffb5caf4a54a41dee788ec5b693d45d9abb4ca8dc417e0b95c39dcc7a0');
INSERT INTO metered_usage VALUES(8,'usage','default','evt_6','cus_1','api_requests',3000000000,'{}','','',1789898400000,1796168986116,X'01bc9cffb5caf4a54a41dee788ec5b693d45d9abb4ca8dc417e0b95c39dcc7a0',X'e4128ad1101e683b13a30b5993143d92156a3e8f64b9f2bc04c3206d716fc4bc');
INSERT INTO metered_usage VALUES(9,'usage','default','evt_7','cus_2','api_requests',7000000,'{}','','',1790935200000,1796168986301,X'e4128ad1101e683b13a30b5993143d92156a3e8f64b9f2bc04c3206d716fc4bc',X'cd93fafe407b9b1ca857d4aab5f2a222e8850bcefe5a8f6fa356bf6c98481bbd');
CREATE TABLE period_closes (
    id           INTEGER PRIMARY KEY,
    customer_id  TEXT    NOT NULL,
    period       TEXT    NOT NULL,          -- label, e.g. 2026-11
    tz           TEXT    NOT NULL,          -- IANA zone the period was computed in
    period_start INTEGER NOT NULL,          -- event time, inclusive
    period_end   INTEGER NOT NULL,          -- event time, exclusive
    grace_ms     INTEGER NOT NULL,
    cutoff       INTEGER NOT NULL,          -- ingestion cutoff: rows with recorded_at < cutoff
    ledger_head  INTEGER NOT NULL,          -- rows with id <= ledger_head (exact)
    closed_at    INTEGER NOT NULL,
    UNIQUE (customer_id, period_start, period_end)
);
INSERT INTO period_closes VALUES(1,'','2026-09','UTC',1788220800000,1790812800000,3600000,1796168985881,7,1796168985881);
INSERT INTO period_closes VALUES(2,'','2026-10','UTC',1790812800000,1793491200000,3600000,1796168986445,9,1796168986445);
CREATE TABLE invoices (
    id           INTEGER PRIMARY KEY,
    close_id     INTEGER NOT NULL REFERENCES period_closes (id),
    customer_id  TEXT    NOT NULL,
    period       TEXT    NOT NULL,
    tz           TEXT    NOT NULL,
    period_start INTEGER NOT NULL,
    period_end   INTEGER NOT NULL,
    cutoff       INTEGER NOT NULL,
    ledger_head  INTEGER NOT NULL,
    closed_at    INTEGER NOT NULL,
    digest       BLOB    NOT NULL, plan           TEXT NOT NULL DEFAULT '', currency       TEXT NOT NULL DEFAULT '', price_snapshot TEXT NOT NULL DEFAULT '', price_digest   BLOB NOT NULL DEFAULT x'', fee            TEXT NOT NULL DEFAULT '', true_up        TEXT NOT NULL DEFAULT '', total          TEXT NOT NULL DEFAULT '',          -- SHA-256 over the invoice's fields and lines
    UNIQUE (customer_id, period_start, period_end)
);
INSERT INTO invoices VALUES(1,1,'cus_0','2026-09','UTC',1788220800000,1790812800000,1796168985881,7,1796168985881,X'ce8cfb458506a508ab5741ab97b4cb4f6183cc94c6ae370c580fadd5d67efc0d','pro','USD','[{"name":"pro","currency":"USD","effective_from":"2026-01-01","fee":"29.00","prices":[{"meter":"api_requests","model":"graduated","tiers":[{"up_to":"1000","unit":"0"},{"unit":"0.001"}]},{"meter":"storage_bytes","model":"unit","unit":"0.000000000023"}]}]',X'24c780ed62133e448ee79e7bd839ac5b68addd2b684e1ec0291ebb95b94de4bf','29.00','0.00','29.00');
INSERT INTO invoices VALUES(2,1,'cus_1','2026-09','UTC',1788220800000,1790812800000,1796168985881,7,1796168985881,X'aa13f2381cd4250d4b69eae68d716e9d1f2ccbdff2f198b37ad67452a5fe1528','pro','USD','[{"name":"pro","currency":"USD","effective_from":"2026-01-01","fee":"29.00","prices":[{"meter":"api_requests","model":"graduated","tiers":[{"up_to":"1000","unit":"0"},{"unit":"0.001"}]},{"meter":"storage_bytes","model":"unit","unit":"0.000000000023"}]}]',X'24c780ed62133e448ee79e7bd839ac5b68addd2b684e1ec0291ebb95b94de4bf','29.00','0.00','241.14');
INSERT INTO invoices VALUES(3,1,'cus_2','2026-09','UTC',1788220800000,1790812800000,1796168985881,7,1796168985881,X'9b4c0f577f56562260c76934a9363652a2a0ec101b565892c684a11abb78b0a7','pro','USD','[{"name":"pro","currency":"USD","effective_from":"2026-01-01","fee":"29.00","prices":[{"meter":"api_requests","model":"graduated","tiers":[{"up_to":"1000","unit":"0"},{"unit":"0.001"}]},{"meter":"storage_bytes","model":"unit","unit":"0.000000000023"}]}]',X'24c780ed62133e448ee79e7bd839ac5b68addd2b684e1ec0291ebb95b94de4bf','29.00','0.00','5000000028.00');
INSERT INTO invoices VALUES(4,1,'cus_3','2026-09','UTC',1788220800000,1790812800000,1796168985881,7,1796168985881,X'2a22f43f6c36c475beabe6325e7417eb84557990c2388831a1cc921c4775c0bb','pro','USD','[{"name":"pro","currency":"USD","effective_from":"2026-01-01","fee":"29.00","prices":[{"meter":"api_requests","model":"graduated","tiers":[{"up_to":"1000","unit":"0"},{"unit":"0.001"}]},{"meter":"storage_bytes","model":"unit","unit":"0.000000000023"}]}]',X'24c780ed62133e448ee79e7bd839ac5b68addd2b684e1ec0291ebb95b94de4bf','29.00','0.00','29.00');
INSERT INTO invoices VALUES(5,2,'cus_1','2026-10','UTC',1790812800000,1793491200000,1796168986445,9,1796168986445,X'd3a8b088d79d6637d9285aab2cd8871769e9d47214717936fa7390abf6d0fbca','pro','USD','[{"name":"pro","currency":"USD","effective_from":"2026-01-01","fee":"29.00","prices":[{"meter":"api_requests","model":"graduated","tiers":[{"up_to":"1000","unit":"0"},{"unit":"0.001"}]},{"meter":"storage_bytes","model":"unit","unit":"0.000000000023"}]}]',X'24c780ed62133e448ee79e7bd839ac5b68addd2b684e1ec0291ebb95b94de4bf','29.00','0.00','32.00');
INSERT INTO invoices VALUES(6,2,'cus_2','2026-10','UTC',1790812800000,1793491200000,1796168986445,9,1796168986445,X'e60289b5ccc3fedcca7dd29c0d29be212b2f82c158a70b7a54017674896a9a02','pro','USD','[{"name":"pro","currency":"USD","effective_from":"2026-01-01","fee":"29.00","prices":[{"meter":"api_requests","model":"graduated","tiers":[{"up_to":"1000","unit":"0"},{"unit":"0.001"}]},{"meter":"storage_bytes","model":"unit","unit":"0.000000000023"}]}]',X'24c780ed62133e448ee79e7bd839ac5b68addd2b684e1ec0291ebb95b94de4bf','29.00','0.00','29.00');
INSERT INTO invoices VALUES(7,2,'cus_3','2026-10','UTC',1790812800000,1793491200000,1796168986445,9,1796168986445,X'd0673832d71fef9ea49adc98bdb1c3b5338d018babf91e66913eb1a21d2f7ec0','pro','USD','[{"name":"pro","currency":"USD","effective_from":"2026-01-01","fee":"29.00","prices":[{"meter":"api_requests","model":"graduated","tiers":[{"up_to":"1000","unit":"0"},{"unit":"0.001"}]},{"meter":"storage_bytes","model":"unit","unit":"0.000000000023"}]}]',X'24c780ed62133e448ee79e7bd839ac5b68addd2b684e1ec0291ebb95b94de4bf','29.00','0.00','29.00');
CREATE TABLE invoice_lines (
    id           INTEGER PRIMARY KEY,
    invoice_id   INTEGER NOT NULL REFERENCES invoices (id),
    line_no      INTEGER NOT NULL,
    customer_id  TEXT    NOT NULL,
    meter        TEXT    NOT NULL,
    aggregation  TEXT    NOT NULL,
    property     TEXT    NOT NULL DEFAULT '',
    unit         TEXT    NOT NULL DEFAULT '',
    late         INTEGER NOT NULL CHECK (late IN (0, 1)),
    -- The period the usage belongs to: the invoice's own, or for a late line
    -- the earlier closed period it was recorded too late for.
    period       TEXT    NOT NULL,
    tz           TEXT    NOT NULL,
    period_start INTEGER NOT NULL,
    period_end   INTEGER NOT NULL,
    -- The line covers this customer's and meter's rows in the period with
    -- after_id < id <= through_id.
    after_id     INTEGER NOT NULL,
    through_id   INTEGER NOT NULL,
    quantity     INTEGER NOT NULL,          -- for a late line: the change to the period's total
    row_count    INTEGER NOT NULL,          -- usage rows covered
    adjustments  INTEGER NOT NULL,          -- adjustment rows covered
    max_id       INTEGER NOT NULL,          -- highest ledger id covered (0: none)
    digest       BLOB    NOT NULL, billed_before  TEXT NOT NULL DEFAULT '0', plan_version   TEXT NOT NULL DEFAULT '', amount_precise TEXT NOT NULL DEFAULT '', amount         TEXT NOT NULL DEFAULT '', charge         TEXT NOT NULL DEFAULT '',          -- SHA-256 over the covered rows' (id, row_hash) in id order
    UNIQUE (invoice_id, line_no)
);
INSERT INTO invoice_lines VALUES(1,1,1,'cus_0','api_requests','sum','','requests',0,'2026-09','UTC',1788220800000,1790812800000,0,7,0,1,0,1,X'ba2c3d0955029e264bd37374b2a2d5290ece1eaecf8e50df2030025b500df9aa','0','2026-01-01','0','0.00','{"before":{"quantity":"0","amount":"0"},"after":{"quantity":"0.000000","amount":"0"},"amount":"0"}');
INSERT INTO invoice_lines VALUES(2,2,1,'cus_1','api_requests','sum','','requests',0,'2026-09','UTC',1788220800000,1790812800000,0,7,1000250000,2,1,7,X'8f651534bfa57e943e4b738aa79219bcbe4eb0eaae8658c454fdd71d9d08c071','0','2026-01-01','0.000250000','0.00','{"before":{"quantity":"0","amount":"0"},"after":{"quantity":"1000.250000","amount":"0.000250000","tiers":[{"tier":0,"quantity":"1000","unit":"0","flat":"0","amount":"0"},{"tier":1,"quantity":"0.250000","unit":"0.001","flat":"0","amount":"0.000250000"}]},"amount":"0.000250000"}');
INSERT INTO invoice_lines VALUES(3,2,2,'cus_1','storage_bytes','max','','bytes',0,'2026-09','UTC',1788220800000,1790812800000,0,7,9223372036854775807,1,0,4,X'b2812180d5e93d89b1f6322e1c5431c3dc5f194e135a6bb5c0a6af83a92b3e46','0','2026-01-01','212.137556847659843561','212.14','{"before":{"quantity":"0","amount":"0"},"after":{"quantity":"9223372036854.775807","amount":"212.137556847659843561"},"amount":"212.137556847659843561"}');
INSERT INTO invoice_lines VALUES(4,3,1,'cus_2','api_requests','sum','','requests',0,'2026-09','UTC',1788220800000,1790812800000,0,7,5000000000000000000,1,0,6,X'52dfb2f02a74ca9281df6f9f20bc6687ea34a57744155de619ff7898332e1003','0','2026-01-01','4999999999.000000000','4999999999.00','{"before":{"quantity":"0","amount":"0"},"after":{"quantity":"5000000000000.000000","amount":"4999999999.000000000","tiers":[{"tier":0,"quantity":"1000","unit":"0","flat":"0","amount":"0"},{"tier":1,"quantity":"4999999999000.000000","unit":"0.001","flat":"0","amount":"4999999999.000000000"}]},"amount":"4999999999.000000000"}');
INSERT INTO invoice_lines VALUES(5,3,2,'cus_2','storage_bytes','max','','bytes',0,'2026-09','UTC',1788220800000,1790812800000,0,7,1,1,0,5,X'561f9a13db9f0833990aad365fe23a93b8dc9308d14c7c821d8a50605cd75b90','0','2026-01-01','0.000000000000000023','0.00','{"before":{"quantity":"0","amount":"0"},"after":{"quantity":"0.000001","amount":"0.000000000000000023"},"amount":"0.000000000000000023"}');
INSERT INTO invoice_lines VALUES(6,5,1,'cus_1','api_requests','sum','','requests',1,'2026-09','UTC',1788220800000,1790812800000,7,9,3000000000,1,0,8,X'ca16fff6c87af449d75415c8a59d79b97bb803164625133c058c50d688be5ddf','1000.25','2026-01-01','3.000000000','3.00','{"before":{"quantity":"1000.25","amount":"0.00025","tiers":[{"tier":0,"quantity":"1000","unit":"0","flat":"0","amount":"0"},{"tier":1,"quantity":"0.25","unit":"0.001","flat":"0","amount":"0.00025"}]},"after":{"quantity":"4000.250000","amount":"3.000250000","tiers":[{"tier":0,"quantity":"1000","unit":"0","flat":"0","amount":"0"},{"tier":1,"quantity":"3000.250000","unit":"0.001","flat":"0","amount":"3.000250000"}]},"amount":"3.000000000"}');
INSERT INTO invoice_lines VALUES(7,6,1,'cus_2','api_requests','sum','','requests',0,'2026-10','UTC',1790812800000,1793491200000,0,9,7000000,1,0,9,X'7e492fd2d314098df3c52d2dc08da9abfec9847ad05c7bc591e43f7af71fd74b','0','2026-01-01','0.000000','0.00','{"before":{"quantity":"0","amount":"0"},"after":{"quantity":"7.000000","amount":"0.000000","tiers":[{"tier":0,"quantity":"7.000000","unit":"0","flat":"0","amount":"0.000000"}]},"amount":"0.000000"}');
CREATE TABLE reconcile_checkpoints (
    provider          TEXT    PRIMARY KEY,
    window_start      INTEGER NOT NULL,
    window_end        INTEGER NOT NULL,
    cursor            TEXT    NOT NULL DEFAULT '',  -- '' when no run is in progress
    pages             INTEGER NOT NULL DEFAULT 0,   -- pages completed in the run in progress
    completed_through INTEGER NOT NULL DEFAULT 0,   -- window_end of the last complete run
    updated_at        INTEGER NOT NULL
);
CREATE TABLE redelivery_requests (
    provider     TEXT    NOT NULL,
    event_id     TEXT    NOT NULL,
    delivery_id  TEXT    NOT NULL,  -- the provider's id of the delivery asked to be repeated
    requested_at INTEGER NOT NULL,
    status_code  INTEGER NOT NULL,  -- what the provider answered
    PRIMARY KEY (provider, event_id)
);
CREATE TABLE replays (
    id                   INTEGER PRIMARY KEY,
    provider             TEXT    NOT NULL,
    event_id             TEXT    NOT NULL,
    replayed_at          INTEGER NOT NULL,
    from_status          TEXT    NOT NULL,
    to_status            TEXT    NOT NULL,
    error                TEXT    NOT NULL DEFAULT '',
    from_handler_version TEXT    NOT NULL,
    handler_version      TEXT    NOT NULL,
    FOREIGN KEY (provider, event_id) REFERENCES receipts (provider, event_id) ON DELETE CASCADE
);
CREATE TABLE prune_runs (
    id             INTEGER PRIMARY KEY,
    pruned_at      INTEGER NOT NULL,
    payload_before INTEGER,          -- NULL when retention.payload is unset
    keys_before    INTEGER,          -- NULL when retention.keys is unset
    bodies_pruned  INTEGER NOT NULL,
    keys_deleted   INTEGER NOT NULL,
    ledger_head_id INTEGER NOT NULL  -- MAX(metered_usage.id) when the prune ended
);
CREATE TABLE IF NOT EXISTS "delivery_attempts" (
    id                INTEGER PRIMARY KEY,
    provider          TEXT    NOT NULL,
    event_id          TEXT    NOT NULL,
    received_at       INTEGER NOT NULL,
    remote_addr       TEXT    NOT NULL DEFAULT '',
    user_agent        TEXT    NOT NULL DEFAULT '',
    request_id        TEXT    NOT NULL DEFAULT '',
    body_sha256       BLOB    NOT NULL,
    signature_headers TEXT    NOT NULL DEFAULT '',
    signature_age_ms  INTEGER,          -- NULL when the scheme signs no timestamp
    outcome           TEXT    NOT NULL CHECK (outcome = 'inserted' OR outcome = 'duplicate' OR outcome = 'payload_mismatch'),
    status_code       INTEGER NOT NULL,
    FOREIGN KEY (provider, event_id) REFERENCES receipts (provider, event_id) ON DELETE CASCADE
);
INSERT INTO delivery_attempts VALUES(1,'default','evt_5',1796168984906,'127.0.0.1:43156','hookledger-send/dev','944402f738a8a34d',X'b5796f0f3f87c0a8d3ff17833c703c4c584b40b0431a297eff5999c4c20384c7',replace('Webhook-Id: evt_5\nWebhook-Timestamp: 1796168984\nWebhook-Signature: v1,eHU9NVNGvoi+CXtpmao6VxcnZraPxLN+F7neCHtL5kc=\n','\n',char(10)),906,'duplicate',200);
CREATE TABLE chain_head (
    id                      INTEGER PRIMARY KEY CHECK (id = 1),
    ledger_id               INTEGER NOT NULL,  -- metered_usage.id of the last ledger row (0: none)
    ledger_hash             BLOB    NOT NULL,  -- its row_hash (32 zero bytes: none)
    receipt_id              INTEGER NOT NULL,  -- receipts.id of the last receipt (0: none)
    receipt_hash            BLOB    NOT NULL,  -- its row_hash
    receipts_pruned_through INTEGER NOT NULL DEFAULT 0
, payload_pruned_before INTEGER NOT NULL DEFAULT 0);
INSERT INTO chain_head VALUES(1,9,X'cd93fafe407b9b1ca857d4aab5f2a222e8850bcefe5a8f6fa356bf6c98481bbd',8,X'3175d9c8bafd7e28dc0e5cd3764f3ace08faa6e854b32cc08e92e6c9d0361dbd',0,0);
CREATE TABLE outbox (
    id              INTEGER PRIMARY KEY,
    receipt_id      INTEGER NOT NULL REFERENCES receipts (id) ON DELETE CASCADE,
    destination     TEXT    NOT NULL,  -- destinations[].name; kept when the destination is removed from the config
    message_id      TEXT    NOT NULL,  -- stable: the same on every attempt
    status          TEXT    NOT NULL CHECK (status = 'pending' OR status = 'delivered' OR status = 'dead'),
    attempts        INTEGER NOT NULL DEFAULT 0,
    created_at      INTEGER NOT NULL,
    pending_since   INTEGER NOT NULL,  -- created_at, or the last `forward retry`: max_age counts from here
    next_attempt_at INTEGER NOT NULL,  -- pending: due when <= now (a claim moves it past the attempt: a lease);
                                       -- delivered or dead: when that happened
    last_attempt_at INTEGER,
    delivered_at    INTEGER,
    last_status     INTEGER NOT NULL DEFAULT 0,  -- the last attempt's HTTP status (0: none)
    last_error      TEXT    NOT NULL DEFAULT '',
    UNIQUE (message_id),
    UNIQUE (receipt_id, destination)
);
CREATE TABLE outbox_attempts (
    id           INTEGER PRIMARY KEY,
    outbox_id    INTEGER NOT NULL REFERENCES outbox (id) ON DELETE CASCADE,
    attempted_at INTEGER NOT NULL,
    status_code  INTEGER NOT NULL DEFAULT 0,  -- 0: no response (connection error, timeout)
    latency_ms   INTEGER NOT NULL,
    response     BLOB    NOT NULL DEFAULT x'', -- the first KiB of the response body
    error        TEXT    NOT NULL DEFAULT ''
);
CREATE TABLE forward_destinations (
    name          TEXT    PRIMARY KEY,
    paused        INTEGER NOT NULL DEFAULT 0 CHECK (paused = 0 OR paused = 1),
    paused_at     INTEGER,
    failures      INTEGER NOT NULL DEFAULT 0,
    backoff_until INTEGER NOT NULL DEFAULT 0,
    last_error    TEXT    NOT NULL DEFAULT '',
    updated_at    INTEGER NOT NULL
);
CREATE TABLE api_keys (
    id         INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,            -- the scope: its events are stored under provider 'api:' || name
    prefix     TEXT    NOT NULL,            -- the key's first characters, so a person can tell keys apart
    key_sha256 BLOB    NOT NULL UNIQUE,
    rate_limit REAL    NOT NULL DEFAULT 0,  -- requests per second; 0: no limit
    burst      INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER                      -- NULL while the key is valid
);
CREATE TABLE IF NOT EXISTS "receipts" (
    id                INTEGER PRIMARY KEY,
    provider          TEXT    NOT NULL,
    event_id          TEXT    NOT NULL,
    event_type        TEXT    NOT NULL DEFAULT '',
    body              BLOB,             -- NULL once pruned by retention; body_sha256 stays
    body_sha256       BLOB    NOT NULL,
    signature_headers TEXT    NOT NULL DEFAULT '',
    status            TEXT    NOT NULL CHECK (status = 'applied' OR status = 'ignored' OR status = 'failed'),
    error             TEXT    NOT NULL DEFAULT '',
    handler_version   TEXT    NOT NULL,
    source            TEXT    NOT NULL CHECK (source = 'webhook' OR source = 'reconcile' OR source = 'replay' OR source = 'api'),
    received_at       INTEGER NOT NULL,
    processed_at      INTEGER NOT NULL,
    prev_hash         BLOB    NOT NULL DEFAULT x'',
    row_hash          BLOB    NOT NULL DEFAULT x'', remote_addr      TEXT    NOT NULL DEFAULT '', user_agent       TEXT    NOT NULL DEFAULT '', request_id       TEXT    NOT NULL DEFAULT '', signature_age_ms INTEGER, status_code      INTEGER,
    UNIQUE (provider, event_id)
);
INSERT INTO receipts VALUES(1,'default','probe','usage.recorded',X'7b226964223a2270726f6265222c2274797065223a2275736167652e7265636f72646564222c2264617461223a7b22637573746f6d6572223a226375735f30222c226d65746572223a226170695f7265717565737473222c227175616e74697479223a302c226f636375727265645f6174223a22323032362d30392d30315430303a30303a30305a227d7d',X'a18848be5299a7203e76b7c29d05b13cde6c386f43e4db900703ea7a937409a9',replace('Webhook-Id: probe\nWebhook-Timestamp: 1796168983\nWebhook-Signature: v1,ocTIu3IDtq77YukJhuDarOoo3S1XuXVh6BaIRW5gQAg=\n','\n',char(10)),'applied','','hookledger/dev+map-b6d14f33','webhook',1796168983513,1796168983515,X'0000000000000000000000000000000000000000000000000000000000000000',X'00ad280f5ab7cf5b2204eeaa37fc74a134759da4a9415246febad7191fd19911','127.0.0.1:43108','hookledger-send/dev','df614d7814d0527c',513,200);
INSERT INTO receipts VALUES(2,'default','evt_1','usage.recorded',X'7b226964223a226576745f31222c2274797065223a2275736167652e7265636f72646564222c2264617461223a7b22637573746f6d6572223a226375735f31222c226d65746572223a226170695f7265717565737473222c227175616e74697479223a313230302c226f636375727265645f6174223a22323032362d30392d30335431303a30303a30305a227d7d',X'5d73a00b6f1ac6cde026df98ce3c100e5fb57ffe101809d652e2c402c2a4a3a2',replace('Webhook-Id: evt_1\nWebhook-Timestamp: 1796168983\nWebhook-Signature: v1,gI5aKh+TfdW6Y8xOPOQ9ffgMDe8AuT/zeqwMdYw3Qlc=\n','\n',char(10)),'applied','','hookledger/dev+map-b6d14f33','webhook',1796168983746,1796168983747,X'00ad280f5ab7cf5b2204eeaa37fc74a134759da4a9415246febad7191fd19911',X'5b694852111d62a0085ed4fdca447630e79d239cb72c641d4087b19ef18e7f62','127.0.0.1:43114','hookledger-send/dev','d1f652848aa16844',746,200);
INSERT INTO receipts VALUES(3,'default','evt_2','usage.recorded',X'7b226964223a226576745f32222c2274797065223a2275736167652e7265636f72646564222c2264617461223a7b22637573746f6d6572223a226375735f31222c226d65746572223a226170695f7265717565737473222c227175616e74697479223a302e32352c226f636375727265645f6174223a22323032362d30392d30345431303a30303a30305a227d7d',X'8e1f76b0234309873e60025fc0b64c49774d9fa33338a286c1da70d72c21f1a3',replace('Webhook-Id: evt_2\nWebhook-Timestamp: 1796168983\nWebhook-Signature: v1,of7w7QxwN+CdUa71eqN2Iw6JtVO9DISBHbKira5ejv0=\n','\n',char(10)),'applied','','hookledger/dev+map-b6d14f33','webhook',1796168983940,1796168983941,X'5b694852111d62a0085ed4fdca447630e79d239cb72c641d4087b19ef18e7f62',X'4a3c13e3d1528947c2fd523c14f78ccc5da40fbc229f13a676500f6dc2a55a7f','127.0.0.1:43118','hookledger-send/dev','51fa34f12d5c1101',940,200);
INSERT INTO receipts VALUES(4,'default','evt_3','usage.recorded',X'7b226964223a226576745f33222c2274797065223a2275736167652e7265636f72646564222c2264617461223a7b22637573746f6d6572223a226375735f31222c226d65746572223a2273746f726167655f6279746573222c227175616e74697479223a393232333337323033363835342e3737353830372c226f636375727265645f6174223a22323032362d30392d30355431303a30303a30305a227d7d',X'1dd38fb86da3b9e0a0ee222602051060c3962f52453c9979387dcd2db504a66a',replace('Webhook-Id: evt_3\nWebhook-Timestamp: 1796168984\nWebhook-Signature: v1,jjP1lJSXfs2rUhtXo2bpxBuEhtK+VGnbt/3JGJbM6xE=\n','\n',char(10)),'applied','','hookledger/dev+map-b6d14f33','webhook',1796168984109,1796168984111,X'4a3c13e3d1528947c2fd523c14f78ccc5da40fbc229f13a676500f6dc2a55a7f',X'b5e9908b5e2fefa17ca0e22bbd5df25d1d8feb42a5b82ec671660c3a21268eb6','127.0.0.1:43134','hookledger-send/dev','7c7c321a898c58c8',109,200);
INSERT INTO receipts VALUES(5,'default','evt_4','usage.recorded',X'7b226964223a226576745f34222c2274797065223a2275736167652e7265636f72646564222c2264617461223a7b22637573746f6d6572223a226375735f32222c226d65746572223a2273746f726167655f6279746573222c227175616e74697479223a302e3030303030312c226f636375727265645f6174223a22323032362d30392d30365431303a30303a30305a227d7d',X'a52d178f4b5857e607b60296c01b4e05ee98fe3b01d1c37d3b57e7d2a84d324d',replace('Webhook-Id: evt_4\nWebhook-Timestamp: 1796168984\nWebhook-Signature: v1,yXI3XnWf82U73VsRru85Z4yY6scqoVwZYfTeH7atpNk=\n','\n',char(10)),'applied','','hookledger/dev+map-b6d14f33','webhook',1796168984436,1796168984436,X'b5e9908b5e2fefa17ca0e22bbd5df25d1d8feb42a5b82ec671660c3a21268eb6',X'dbf19d2d1a186b6e1caeff2f12c1f2cffffecabd21be23e36936f697c322cb09','127.0.0.1:43146','hookledger-send/dev','664c9606bacc7bb0',436,200);
INSERT INTO receipts VALUES(6,'default','evt_5','usage.recorded',X'7b226964223a226576745f35222c2274797065223a2275736167652e7265636f72646564222c2264617461223a7b22637573746f6d6572223a226375735f32222c226d65746572223a226170695f7265717565737473222c227175616e74697479223a353030303030303030303030302c226f636375727265645f6174223a22323032362d30392d30375431303a30303a30305a227d7d',X'b5796f0f3f87c0a8d3ff17833c703c4c584b40b0431a297eff5999c4c20384c7',replace('Webhook-Id: evt_5\nWebhook-Timestamp: 1796168984\nWebhook-Signature: v1,eHU9NVNGvoi+CXtpmao6VxcnZraPxLN+F7neCHtL5kc=\n','\n',char(10)),'applied','','hookledger/dev+map-b6d14f33','webhook',1796168984587,1796168984591,X'dbf19d2d1a186b6e1caeff2f12c1f2cffffecabd21be23e36936f697c322cb09',X'20fed389e36b837391a7c0467264e5abf91c78f4238907061f9b25ecb818733e','127.0.0.1:43150','hookledger-send/dev','522040199c98da35',587,200);
INSERT INTO receipts VALUES(7,'default','evt_6','usage.recorded',X'7b226964223a226576745f36222c2274797065223a2275736167652e7265636f72646564222c2264617461223a7b22637573746f6d6572223a226375735f31222c226d65746572223a226170695f7265717565737473222c227175616e74697479223a333030302c226f636375727265645f6174223a22323032362d30392d32305431303a30303a30305a227d7d',X'f03d416fc01f58fa1084f4ee74fa01f5f44914a88177ac7307b7dce3df900cbb',replace('Webhook-Id: evt_6\nWebhook-Timestamp: 1796168986\nWebhook-Signature: v1,3cE2ToyfFYP44ATA4DnqqZkT9/nE+obLEd7IJ4xGoSs=\n','\n',char(10)),'applied','','hookledger/dev+map-b6d14f33','webhook',1796168986115,1796168986116,X'20fed389e36b837391a7c0467264e5abf91c78f4238907061f9b25ecb818733e',X'a895936a87cfd803b8af3ed18e7469c653d20e2b44b47d8408a18e8882bb8a82','127.0.0.1:60228','hookledger-send/dev','fb7a838f6191a64a',115,200);
INSERT INTO receipts VALUES(8,'default','evt_7','usage.recorded',X'7b226964223a226576745f37222c2274797065223a2275736167652e7265636f72646564222c2264617461223a7b22637573746f6d6572223a226375735f32222c226d65746572223a226170695f7265717565737473222c227175616e74697479223a372c226f636375727265645f6174223a22323032362d31302d30325431303a30303a30305a227d7d',X'2fb392b685e6eaf46629b9f5d19785c9afd0285f9882edb058a20b67a492097a',replace('Webhook-Id: evt_7\nWebhook-Timestamp: 1796168986\nWebhook-Signature: v1,0o84ZRC5oxPHkxw57MP39gfr5bL5rNuVv6fTQB/n9bs=\n','\n',char(10)),'applied','','hookledger/dev+map-b6d14f33','webhook',1796168986301,1796168986301,X'a895936a87cfd803b8af3ed18e7469c653d20e2b44b47d8408a18e8882bb8a82',X'3175d9c8bafd7e28dc0e5cd3764f3ace08faa6e854b32cc08e92e6c9d0361dbd','127.0.0.1:60236','hookledger-send/dev','12f38dce2036fa6d',301,200);
CREATE TABLE customers (
    id           INTEGER PRIMARY KEY,
    customer_id  TEXT    NOT NULL,
    name         TEXT    NOT NULL DEFAULT '',
    email        TEXT    NOT NULL DEFAULT '',
    external_ids TEXT    NOT NULL DEFAULT '{}', -- a JSON object, keys sorted: {"stripe":"cus_…"}
    recorded_at  INTEGER NOT NULL,
    note         TEXT    NOT NULL DEFAULT ''    -- why the change was made
);
INSERT INTO customers VALUES(1,'cus_3','Fee only','','{}',1796168985555,'');
CREATE TABLE plan_assignments (
    id             INTEGER PRIMARY KEY,
    customer_id    TEXT    NOT NULL,
    plan           TEXT    NOT NULL,
    effective_from TEXT    NOT NULL,  -- YYYY-MM-DD, compared with an invoice period's first day in the period's zone
    recorded_at    INTEGER NOT NULL,
    note           TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX metered_usage_customer ON metered_usage (customer_id, meter, occurred_at);
CREATE TRIGGER metered_usage_no_update BEFORE UPDATE ON metered_usage
BEGIN
    SELECT RAISE(ABORT, 'metered_usage is append-only: add an adjustment instead');
END;
CREATE TRIGGER metered_usage_no_delete BEFORE DELETE ON metered_usage
BEGIN
    SELECT RAISE(ABORT, 'metered_usage is append-only: add an adjustment instead');
END;
CREATE INDEX metered_usage_occurred ON metered_usage (occurred_at);
CREATE INDEX invoices_close ON invoices (close_id);
CREATE INDEX invoice_lines_late ON invoice_lines (customer_id, period_start, period_end, late);
CREATE TRIGGER period_closes_no_update BEFORE UPDATE ON period_closes
BEGIN
    SELECT RAISE(ABORT, 'closed periods never change');
END;
CREATE TRIGGER period_closes_no_delete BEFORE DELETE ON period_closes
BEGIN
    SELECT RAISE(ABORT, 'closed periods never change');
END;
CREATE TRIGGER invoices_no_update BEFORE UPDATE ON invoices
BEGIN
    SELECT RAISE(ABORT, 'a closed invoice never changes: add an adjustment instead');
END;
CREATE TRIGGER invoices_no_delete BEFORE DELETE ON invoices
BEGIN
    SELECT RAISE(ABORT, 'a closed invoice never changes: add an adjustment instead');
END;
CREATE TRIGGER invoice_lines_no_update BEFORE UPDATE ON invoice_lines
BEGIN
    SELECT RAISE(ABORT, 'a closed invoice never changes: add an adjustment instead');
END;
CREATE TRIGGER invoice_lines_no_delete BEFORE DELETE ON invoice_lines
BEGIN
    SELECT RAISE(ABORT, 'a closed invoice never changes: add an adjustment instead');
END;
CREATE INDEX replays_event ON replays (provider, event_id);
CREATE INDEX delivery_attempts_event ON delivery_attempts (provider, event_id);
CREATE INDEX delivery_attempts_mismatch ON delivery_attempts (received_at) WHERE outcome = 'payload_mismatch';
CREATE TRIGGER chain_head_no_delete BEFORE DELETE ON chain_head
BEGIN
    SELECT RAISE(ABORT, 'chain_head is where the hash chains end: it is never deleted');
END;
CREATE INDEX outbox_due ON outbox (destination, status, next_attempt_at, pending_since);
CREATE INDEX outbox_attempts_message ON outbox_attempts (outbox_id);
CREATE TRIGGER api_keys_no_delete BEFORE DELETE ON api_keys
BEGIN
    SELECT RAISE(ABORT, 'API keys are revoked, never deleted');
END;
CREATE TRIGGER api_keys_revoke_only BEFORE UPDATE ON api_keys
WHEN NEW.id != OLD.id OR NEW.name != OLD.name OR NEW.prefix != OLD.prefix OR NEW.key_sha256 != OLD.key_sha256
  OR NEW.rate_limit != OLD.rate_limit OR NEW.burst != OLD.burst OR NEW.created_at != OLD.created_at
  OR OLD.revoked_at IS NOT NULL
BEGIN
    SELECT RAISE(ABORT, 'an API key only changes by being revoked, once');
END;
CREATE INDEX receipts_status ON receipts (status, received_at);
CREATE TRIGGER receipts_custody_facts_no_update
BEFORE UPDATE OF id, provider, event_id, event_type, body_sha256, source, received_at, prev_hash, row_hash,
                 remote_addr, user_agent, request_id, signature_age_ms, status_code ON receipts
BEGIN
    SELECT RAISE(ABORT, 'a receipt''s custody facts never change');
END;
CREATE TRIGGER chain_head_forward_only BEFORE UPDATE ON chain_head
WHEN NEW.id != OLD.id OR NEW.ledger_id < OLD.ledger_id OR NEW.receipt_id < OLD.receipt_id
  OR NEW.receipts_pruned_through < OLD.receipts_pruned_through OR NEW.payload_pruned_before < OLD.payload_pruned_before
BEGIN
    SELECT RAISE(ABORT, 'the chain head only moves forward');
END;
CREATE INDEX customers_history ON customers (customer_id, id);
CREATE TRIGGER customers_no_update BEFORE UPDATE ON customers
BEGIN
    SELECT RAISE(ABORT, 'a customer changes by a new row, never an edit');
END;
CREATE TRIGGER customers_no_delete BEFORE DELETE ON customers
BEGIN
    SELECT RAISE(ABORT, 'a customer changes by a new row, never an edit');
END;
CREATE INDEX plan_assignments_history ON plan_assignments (customer_id, effective_from, id);
CREATE TRIGGER plan_assignments_no_update BEFORE UPDATE ON plan_assignments
BEGIN
    SELECT RAISE(ABORT, 'a plan assignment is appended, never edited');
END;
CREATE TRIGGER plan_assignments_no_delete BEFORE DELETE ON plan_assignments
BEGIN
    SELECT RAISE(ABORT, 'a plan assignment is appended, never edited');
END;
COMMIT;
