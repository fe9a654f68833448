package custody_test

import (
	"testing"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/internal/testenv"
)

// env is the write path on a real SQLite file behind the real webhook handler
// and a real HTTP listener: the tests here post signed deliveries and assert
// on the rows they leave.
type env struct{ *testenv.Env }

// newEnv starts a receiver with the configuration edits applied to the
// zero-config "default" standard provider and usage.recorded mapping.
func newEnv(t *testing.T, backend string, edits ...func(*config.Config)) *env {
	t.Helper()
	return newEnvWithWriter(t, backend, nil, edits...)
}

// newEnvWithWriter is newEnv with configure applied to the writer before it
// opens (its hooks are read by the writer goroutine).
func newEnvWithWriter(t testing.TB, backend string, configure func(*custody.Writer), edits ...func(*config.Config)) *env {
	t.Helper()
	return &env{testenv.New(t, testenv.Options{Backend: backend, Writer: configure, Edits: edits})}
}
