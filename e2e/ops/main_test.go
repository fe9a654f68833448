package ops_test

import (
	"testing"

	"github.com/hookledger/hookledger/internal/testenv"
)

// TestMain builds the binary once for this package's tests and removes it after.
func TestMain(m *testing.M) { testenv.Main(m) }
