// Package ledger decides what the metered-usage ledger means: how a
// provider's event maps to usage rows (mapping.go, meter.go), the exact
// decimal quantities and totals that never wrap (quantity.go, total.go), the
// half-open event-time periods (period.go), aggregation (aggregate.go,
// usage.go), the hash chains over ledger rows and receipts (chain.go,
// head.go), invoices with their two cutoffs and late usage (close.go,
// invoice.go, late.go), adjustments (adjust.go), and one line check and one
// chain check (check.go) shared by verify and the dispute trace.
//
// It holds no SQL: it declares the few storage methods it needs as small
// interfaces (store.go) that the backend in schema/ implements, and works on
// schema's record types.
package ledger
