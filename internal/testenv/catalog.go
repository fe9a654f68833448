package testenv

import (
	"testing"

	"github.com/hookledger/hookledger/pricing"
)

// Catalog validates plans, as config does at startup, and makes their
// catalog; either failing fails the test.
func Catalog(t testing.TB, plans []pricing.Plan) *pricing.Catalog {
	t.Helper()
	for i := range plans {
		if err := plans[i].Validate(); err != nil {
			t.Fatal(err)
		}
	}
	catalog, err := pricing.NewCatalog(plans)
	if err != nil {
		t.Fatal(err)
	}
	return catalog
}
