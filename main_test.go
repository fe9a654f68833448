package main

import (
	"testing"

	"github.com/hookledger/hookledger/internal/testenv"
)

// The tests of this package run the built binary: testenv builds it once for
// all of them (and once more with release ldflags for TestOperating).
func TestMain(m *testing.M) { testenv.Main(m) }
