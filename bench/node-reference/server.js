// The reference design of the seed articles, for `task bench:postgres`:
// Node.js + Express + pg, two workers (cluster), one transaction per event
// holding a receipt insert (ON CONFLICT DO NOTHING decides duplicates) and,
// for a new event, one usage insert. Standard Webhooks verification over the
// raw body, as hookledger does. It is a measuring stick, not a product: no
// hash chain, no attempts, no group commit.
//
//   HOOKLEDGER_SECRET=whsec_... DATABASE_URL=postgres://... PORT=8090 node server.js
'use strict';
const cluster = require('node:cluster');
const crypto = require('node:crypto');
const express = require('express');
const { Pool } = require('pg');

const secret = Buffer.from((process.env.HOOKLEDGER_SECRET || '').replace(/^whsec_/, ''), 'base64');
const port = Number(process.env.PORT || 8090);
const workers = Number(process.env.WORKERS || 2);

if (cluster.isPrimary) {
  const pool = new Pool({ connectionString: process.env.DATABASE_URL, max: 1 });
  pool.query(`CREATE TABLE IF NOT EXISTS ref_receipts (provider text, event_id text, body bytea, received_at bigint,
      PRIMARY KEY (provider, event_id));
    CREATE TABLE IF NOT EXISTS ref_usage (id bigserial PRIMARY KEY, provider text, event_id text, customer_id text,
      meter text, quantity text, occurred_at text, UNIQUE (provider, event_id, meter))`)
    .then(() => pool.end())
    .then(() => { for (let i = 0; i < workers; i++) cluster.fork(); })
    .catch((err) => { console.error(err); process.exit(1); });
  // On stderr, where hookledger logs its own listen address (the benchmark harness reads it).
  cluster.on('listening', (w, addr) => console.error(JSON.stringify({ msg: 'listening', addr: `127.0.0.1:${addr.port}` })));
} else {
  const pool = new Pool({ connectionString: process.env.DATABASE_URL, max: 16 });
  const app = express();
  app.post('/webhooks/:provider', express.raw({ type: '*/*', limit: '256kb' }), async (req, res) => {
    const id = req.get('webhook-id'), ts = req.get('webhook-timestamp'), sigs = req.get('webhook-signature') || '';
    if (!id || !ts || Math.abs(Date.now() / 1000 - Number(ts)) > 300) return res.status(401).json({ error: 'bad timestamp' });
    const want = crypto.createHmac('sha256', secret).update(`${id}.${ts}.`).update(req.body).digest();
    const ok = sigs.split(' ').some((s) => {
      const got = Buffer.from(s.replace(/^v1,/, ''), 'base64');
      return got.length === want.length && crypto.timingSafeEqual(got, want);
    });
    if (!ok) return res.status(401).json({ error: 'bad signature' });
    let event;
    try { event = JSON.parse(req.body); } catch { return res.status(400).json({ error: 'not json' }); }
    const d = event.data || {};
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const r = await client.query(`INSERT INTO ref_receipts (provider, event_id, body, received_at) VALUES ($1, $2, $3, $4)
        ON CONFLICT DO NOTHING`, [req.params.provider, id, req.body, Date.now()]);
      if (r.rowCount === 1) {
        await client.query(`INSERT INTO ref_usage (provider, event_id, customer_id, meter, quantity, occurred_at)
          VALUES ($1, $2, $3, $4, $5, $6)`, [req.params.provider, id, d.customer, d.meter, String(d.quantity), d.occurred_at]);
      }
      await client.query('COMMIT');
      res.json({ accepted: true, duplicate: r.rowCount === 0 });
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      res.status(503).json({ error: String(err) });
    } finally {
      client.release();
    }
  });
  app.listen(port, '127.0.0.1');
}
