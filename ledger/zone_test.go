package ledger_test

import (
	"testing"

	"github.com/hookledger/hookledger/ledger"
)

// The writer asks for the usage state's zone in every batch: a zone is
// loaded (its file read and parsed) once, then shared.
func TestLoadZoneLoadsOnce(t *testing.T) {
	a, err := ledger.LoadZone("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ledger.LoadZone("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Error("Europe/Berlin was loaded twice")
	}
	if _, err := ledger.LoadZone("Mars/Olympus"); err == nil {
		t.Error("an unknown zone loaded")
	}
}

func BenchmarkLoadZone(b *testing.B) {
	for b.Loop() {
		if _, err := ledger.LoadZone("Europe/Berlin"); err != nil {
			b.Fatal(err)
		}
	}
}
