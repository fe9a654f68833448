package ledger

// Hooks for the external tests and benchmarks in package ledger_test.

// NoIndex makes q read the table without its indexes (benchmark comparison).
func (q UsageQuery) NoIndex() UsageQuery { q.noIndex = true; return q }

// NoIndex makes the close read the table without its indexes.
func (r CloseRequest) NoIndex() CloseRequest { r.noIndex = true; return r }

// UsageSQL is the statement Query runs for q.
func UsageSQL(q UsageQuery) (string, []any) { return usageSQL(q) }

// PeriodSQL is the statement a close runs to read its period's rows.
func PeriodSQL(r CloseRequest, head int64) (string, []any) {
	f := rowFilter{from: r.Period.Start.UnixMilli(), to: r.Period.End.UnixMilli(), customer: r.Customer, throughID: head, noIndex: r.noIndex}
	from, args := f.where()
	return "SELECT id, kind, customer_id, meter, quantity, occurred_at, properties, row_hash" + from, args
}
