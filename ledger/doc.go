// Package ledger decides what the metered-usage ledger means: how a
// provider's event maps to usage rows (mapping.go, meter.go), the exact
// decimal quantities and totals that never wrap (quantity.go, total.go), the
// half-open event-time periods (period.go), aggregation (aggregate.go,
// usage.go, dimension.go, gauge.go), the hash chains over ledger rows and
// receipts and where they end (chain.go, head.go; a row's place in the
// chain as verify and the dispute trace check it, chaincheck.go),
// adjustments and voids (adjust.go, void.go, bulk.go) and the usage state
// (state.go). What every check of verify reports is
// problem.go's; the checks of what this package owns (anchors, voids, the
// usage state) are beside it. The customer registry is package customer,
// invoicing, money and verify itself package invoice, both above this one.
//
// It holds no SQL: it declares the few storage methods it needs as small
// interfaces (store.go) that the backend in schema/ implements, and works on
// schema's record types.
package ledger
