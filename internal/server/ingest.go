package server

import (
	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ingest"
	"github.com/hookledger/hookledger/receiver"
	"github.com/hookledger/hookledger/schema"
)

// ingestAPI is the first-party ingest API (POST /v1/events) on the webhook
// listener. Its keys live in the database, where `hookledger keys` (another
// process) creates and revokes them; the keyring reads them from there with a
// short cache (ingest.key_cache), so serve needs no restart or signal to
// learn about a key. Its events go through the same writer as webhooks, so
// it needs nothing of its own in Close.
func ingestAPI(cfg *config.Config, db *schema.DB, w *custody.Writer) *receiver.API {
	keys := ingest.NewKeyring(db)
	keys.TTL = cfg.Ingest.KeyCache.Duration
	return &receiver.API{
		Keys:      keys,
		Custody:   w,
		MaxEvents: cfg.Ingest.MaxEvents,
		MaxBody:   cfg.Ingest.MaxBody,
		MaxDepth:  config.DefaultMaxDepth,
	}
}
