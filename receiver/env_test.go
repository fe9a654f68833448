package receiver_test

import (
	"testing"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/internal/testenv"
)

// env is a receiver on a real SQLite file behind a real HTTP listener. The
// tests that use it are in package receiver_test: testenv imports receiver.
type env struct{ *testenv.Env }

// newEnv starts a receiver with the configuration edits applied to the
// zero-config "default" standard provider and usage.recorded mapping.
func newEnv(t *testing.T, edits ...func(*config.Config)) *env {
	t.Helper()
	return &env{testenv.New(t, testenv.Options{Edits: edits})}
}
