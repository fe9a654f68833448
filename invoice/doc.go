// Package invoice closes periods into invoices and proves them: a close with
// its two cutoffs and late usage (close.go, late.go, periodscan.go,
// periodbill.go), what an invoice charges, frozen at its close (money.go,
// moneyview.go, dimprice.go, parts.go for a plan change inside a period,
// frozen.go for the versions a close froze), prepaid credits (credits.go,
// creditdraw.go), the digests and close seals that make an edit detectable
// (digest.go, seal.go), dry runs (preview.go, changemoney.go, closingmonth.go,
// stranded.go), and verify (verify.go, verify_custody.go, verify_since.go,
// with the checks of invoices, seals, coverage, credits and spend crossings
// beside what they check; check.go is the line check verify and the dispute
// trace share, trace.go what the trace reads through it).
//
// It builds on package ledger (rows, quantities, aggregation, the chains)
// and package customer (who is on which plan when) and, like them, holds no SQL: invoicestore.go declares what it
// reads and writes, which schema implements.
package invoice
