package testenv

import (
	"context"
	"testing"

	"github.com/hookledger/hookledger/schema"
)

// Delivery attempts are stored in two places (migration 0009): the first
// attempt of a receipt in the receipt's row, every redelivery in
// delivery_attempts. Tests count and read them here, through the readers
// the product uses (schema's CountAttempts, AllAttempts, EventAttempts), so their
// assertions mean "attempts", wherever one is stored.

// Attempts counts every delivery attempt in the database.
func (e *Env) Attempts() int {
	e.T.Helper()
	n, err := e.DB.CountAttempts(context.Background())
	if err != nil {
		e.T.Fatal(err)
	}
	return int(n)
}

// CountAttempts counts the attempts for which keep is true.
func (e *Env) CountAttempts(keep func(schema.Attempt) bool) int {
	e.T.Helper()
	n := 0
	for _, a := range e.AllAttempts() {
		if keep(a) {
			n++
		}
	}
	return n
}

// EventAttempts reads provider's attempts of eventIDs as the dispute trace
// does: per event the first attempt first, then the redeliveries.
func (e *Env) EventAttempts(provider string, eventIDs ...string) []schema.Attempt {
	e.T.Helper()
	as, err := EventAttempts(e.DB, provider, eventIDs...)
	if err != nil {
		e.T.Fatal(err)
	}
	return as
}

// AllAttempts reads every attempt, event by event in (provider, event id)
// order, and within one as EventAttempts orders them.
func (e *Env) AllAttempts() []schema.Attempt {
	e.T.Helper()
	as, err := AllAttempts(e.DB)
	if err != nil {
		e.T.Fatal(err)
	}
	return as
}

// CountAttempts counts the attempts in the database at path (a SQLite file
// or a postgres:// URL), opened read-only, for which keep is true (nil:
// every attempt).
func CountAttempts(t testing.TB, path string, keep func(schema.Attempt) bool) int {
	t.Helper()
	db, err := schema.Open(context.Background(), path, schema.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if keep == nil {
		n, err := db.CountAttempts(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return int(n)
	}
	as, err := AllAttempts(db)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, a := range as {
		if keep(a) {
			n++
		}
	}
	return n
}

// EventAttempts reads provider's attempts of eventIDs in db.
func EventAttempts(db *schema.DB, provider string, eventIDs ...string) ([]schema.Attempt, error) {
	var as []schema.Attempt
	err := db.View(context.Background(), func(tx *schema.ReadTx) error {
		var err error
		as, err = tx.EventAttempts(context.Background(), provider, eventIDs)
		return err
	})
	return as, err
}

// AllAttempts reads every attempt in db (schema.DB.AllAttempts).
func AllAttempts(db *schema.DB) ([]schema.Attempt, error) {
	return db.AllAttempts(context.Background())
}
