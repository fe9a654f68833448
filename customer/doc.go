// Package customer is the customer registry: each customer's history of
// name, email and ids in other systems (customer.go), the plan assignments
// that say which plan version prices a customer on a day (Plans), and the
// rule that an assignment never reaches into a period already closed
// (assignclosed.go). Registering is optional: the ledger bills any customer
// id its events name.
//
// It builds on package ledger (identifiers, text, periods); package invoice
// prices with its Plans. Like both, it holds no SQL: schema's RegistryTx
// writes the registry.
package customer
