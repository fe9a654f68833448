package schema

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// versionCustomers is the migration that created customers and plan_assignments.
const versionCustomers = 11

// CustomerRecord is one row of the customer registry: the customer as it
// was from RecordedAt until the next row with the same CustomerID.
type CustomerRecord struct {
	ID          int64  `db:"id"`
	CustomerID  string `db:"customer_id"`
	Name        string `db:"name"`
	Email       string `db:"email"`
	ExternalIDs string `db:"external_ids"` // a JSON object, keys sorted
	RecordedAt  int64  `db:"recorded_at"`
	Note        string `db:"note"`
}

// PlanAssignment is one row of plan_assignments: from EffectiveFrom on,
// CustomerID is on Plan (until a later assignment takes effect).
type PlanAssignment struct {
	ID            int64  `db:"id"`
	CustomerID    string `db:"customer_id"`
	Plan          string `db:"plan"`
	EffectiveFrom string `db:"effective_from"` // YYYY-MM-DD
	RecordedAt    int64  `db:"recorded_at"`
	Note          string `db:"note"`
}

// RegistryTx is a transaction on the customer registry, so a customer and
// its first plan assignment are stored together or not at all.
type RegistryTx struct{ tx *sqlx.Tx }

// RegistryTx runs fn in one write transaction. The registry is no part of
// the custody chain, so it takes turns with serve's writer through the
// write lock and the busy timeout, like the other CLI writes.
func (db *DB) RegistryTx(ctx context.Context, fn func(*RegistryTx) error) error {
	tx, err := db.Write.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	if err := fn(&RegistryTx{tx: tx}); err != nil {
		return err
	}
	db.registry.Add(1) // before it commits (DataVersion)
	return tx.Commit()
}

// InsertCustomer appends one registry row and returns its id.
func (t *RegistryTx) InsertCustomer(ctx context.Context, c CustomerRecord) (int64, error) {
	var id int64
	err := t.tx.QueryRowxContext(ctx, `INSERT INTO customers (customer_id, name, email, external_ids, recorded_at, note)
		VALUES (?, ?, ?, ?, ?, ?) RETURNING id`, c.CustomerID, c.Name, c.Email, c.ExternalIDs, c.RecordedAt, c.Note).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("insert customer %q: %w", c.CustomerID, err)
	}
	return id, nil
}

// InsertPlanAssignment appends one plan assignment and returns its id.
func (t *RegistryTx) InsertPlanAssignment(ctx context.Context, a PlanAssignment) (int64, error) {
	var id int64
	err := t.tx.QueryRowxContext(ctx, `INSERT INTO plan_assignments (customer_id, plan, effective_from, recorded_at, note)
		VALUES (?, ?, ?, ?, ?) RETURNING id`, a.CustomerID, a.Plan, a.EffectiveFrom, a.RecordedAt, a.Note).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("insert plan assignment for %q: %w", a.CustomerID, err)
	}
	return id, nil
}

// PlanAssignments is every plan assignment of customer, by date and id.
func (t *RegistryTx) PlanAssignments(ctx context.Context, customer string) ([]PlanAssignment, error) {
	return planAssignments(ctx, t.tx, customer)
}

// PeriodCloses is every close that applies to customer: its own and the
// closes for all customers. An assignment must not reach into them.
func (t *RegistryTx) PeriodCloses(ctx context.Context, customer string) ([]PeriodClose, error) {
	cs, err := periodCloses(ctx, t.tx, customer)
	if err != nil {
		return nil, fmt.Errorf("read closed periods: %w", err)
	}
	return cs, nil
}

// CustomerHistory is every registry row of one customer, oldest first.
func (t *RegistryTx) CustomerHistory(ctx context.Context, customer string) ([]CustomerRecord, error) {
	return customerRows(ctx, t.tx, customer)
}

// CustomerHistory is every registry row of one customer ("" for every
// customer), oldest first within a customer. A database older than the
// registry has none.
func (db *DB) CustomerHistory(ctx context.Context, customer string) ([]CustomerRecord, error) {
	rs, err := customerRows(ctx, db.Read, customer)
	if err != nil && predates(ctx, db.Read, versionCustomers) {
		return nil, nil
	}
	return rs, err
}

func customerRows(ctx context.Context, q sqlx.QueryerContext, customer string) ([]CustomerRecord, error) {
	var rs []CustomerRecord
	where, args := whereEqual(equal{"customer_id", customer})
	err := sqlx.SelectContext(ctx, q, &rs, `SELECT id, customer_id, name, email, external_ids, recorded_at, note FROM customers`+
		where+` ORDER BY customer_id, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("read customers: %w", err)
	}
	return rs, nil
}

// PlanAssignments is every plan assignment of one customer ("" for every
// customer), by customer, date and id. A database older than the registry
// has none.
func (db *DB) PlanAssignments(ctx context.Context, customer string) ([]PlanAssignment, error) {
	as, err := planAssignments(ctx, db.hot, customer)
	if err != nil && predates(ctx, db.Read, versionCustomers) {
		return nil, nil
	}
	return as, err
}

func planAssignments(ctx context.Context, q sqlx.QueryerContext, customer string) ([]PlanAssignment, error) {
	var as []PlanAssignment
	query, args := planAssignmentsQuery(customer)
	if err := sqlx.SelectContext(ctx, q, &as, query, args...); err != nil {
		return nil, fmt.Errorf("read plan assignments: %w", err)
	}
	return as, nil
}

// planAssignmentsQuery reads the plan assignments of customer ("" for every
// customer), by customer, date and id.
func planAssignmentsQuery(customer string) (string, []any) {
	where, args := whereEqual(equal{"customer_id", customer})
	return `SELECT id, customer_id, plan, effective_from, recorded_at, note FROM plan_assignments` + where +
		` ORDER BY customer_id, effective_from, id`, args
}
