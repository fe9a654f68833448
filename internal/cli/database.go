package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/internal/writer"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/schema"
)

// Only serve, migrate and restore create a database. Every other command
// opens the existing one, so a mistyped --data or a fresh directory is an
// error that names the path, not a new empty ledger (where `invoice close`
// would close a month for good).

// openExisting opens the configured database for reading. It creates
// nothing, works in a read-only data directory and needs no secrets.
func openExisting(c *cli.Context) (*schema.DB, error) {
	_, database, err := locate(c)
	if err != nil {
		return nil, err
	}
	return openDB(c.Context, database, schema.Options{ReadOnly: true})
}

// openWritable opens (and migrates) the configured, existing database for a
// command that writes: invoice close, adjust, dev seed.
func openWritable(c *cli.Context) (*schema.DB, error) {
	_, database, err := locate(c)
	if err != nil {
		return nil, err
	}
	return openDB(c.Context, database, schema.Options{MustExist: true})
}

// openCustody opens the existing database and, unless readOnly, a writer on
// it. A writing command shares the database with a running serve: each
// write transaction takes the write lock from its start, so they take turns.
func openCustody(ctx context.Context, cfg *config.Config, readOnly bool) (*schema.DB, *custody.Writer, error) {
	db, err := openDB(ctx, cfg.DBPath(), schema.Options{ReadOnly: readOnly, MustExist: true})
	if err != nil {
		return nil, nil, err
	}
	if readOnly {
		return db, nil, nil
	}
	// The writer prices spend with the plans, as serve's does: a
	// configuration serve would refuse is refused here too.
	if err := invoice.CheckFrozenPrices(ctx, db, cfg.Catalog); err != nil {
		db.Close()
		return nil, nil, err
	}
	// The writer serve has, with every hook: a reconciled event's outbox
	// rows (serve's relay delivers them), a row's Stripe push, a threshold
	// alert, each in its own transaction as in serve.
	w := writer.New(db, cfg)
	if err := w.Open(ctx); err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, w, nil
}

func closeCustody(db *schema.DB, w *custody.Writer) {
	if w != nil {
		w.Close()
	}
	db.Close()
}

// openDB opens an existing database, saying what to do when there is none.
func openDB(ctx context.Context, path string, opts schema.Options) (*schema.DB, error) {
	db, err := schema.Open(ctx, path, opts)
	if errors.Is(err, schema.ErrNoDatabase) {
		if schema.IsPostgres(path) {
			return nil, fmt.Errorf("%w: run `hookledger migrate` (or serve) once to create hookledger's tables there", err)
		}
		return nil, fmt.Errorf("no database at %s: run `hookledger serve` or `hookledger migrate` to create it, or point --data (or --config) at the data directory", path)
	}
	return db, err
}
