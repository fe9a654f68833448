package ledger

import (
	"github.com/hookledger/hookledger/schema"
)

// Hooks for the external tests and benchmarks in package ledger_test.

// NoIndex makes q read the table without its indexes (benchmark comparison).
func (q UsageQuery) NoIndex() UsageQuery { q.noIndex = true; return q }

// UsageSQL is the statement Query runs for q.
func UsageSQL(q UsageQuery) (string, []any) { return schema.UsageSQL(usageScan(q)) }
