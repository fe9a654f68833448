package invoice_test

import (
	"testing"

	"github.com/hookledger/hookledger/internal/testenv"
)

// env is a real database file with a real writer whose clock the test sets
// (testenv.Ledger); the tests add their own helpers to it.
type env struct{ *testenv.Ledger }

type row = testenv.Row

func newEnv(t testing.TB) *env { return &env{testenv.NewLedger(t, testenv.Options{})} }

// newEnvAt opens the database in dir, which may hold one already.
func newEnvAt(t testing.TB, dir string) *env {
	return &env{testenv.NewLedger(t, testenv.Options{Dir: dir})}
}

var (
	q        = testenv.Total
	ts       = testenv.Time
	mustZone = testenv.Zone
)
