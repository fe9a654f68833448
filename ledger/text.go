package ledger

import (
	"fmt"

	"github.com/hookledger/hookledger/schema"
)

// CheckText refuses text that no backend can store as text: bytes that are
// not UTF-8, and NUL. PostgreSQL's text refuses both (an error inside the
// transaction, a 500 or a 503 retried for ever), while SQLite stores them;
// refusing them up front makes them bad input on both backends alike (a 400,
// a CLI error, a failed receipt), and keeps every stored value copyable from
// SQLite to PostgreSQL. It is the rule for every text a user or a sender
// gives hookledger to keep (names, emails, notes, reasons, actors, mapped
// properties); identifiers, which are also keys, follow the stricter
// CheckIdentifier.
func CheckText(s string) error { return schema.CheckText(s) }

// Text is one text field to be stored, named as its user names it (a JSON
// field, a flag, a configuration key).
type Text struct{ Field, Value string }

// CheckTexts is CheckText for each field in turn; the error of the first
// that fails names it ("name: contains a NUL ...").
func CheckTexts(fields ...Text) error {
	for _, f := range fields {
		if err := CheckText(f.Value); err != nil {
			return fmt.Errorf("%s: %w", f.Field, err)
		}
	}
	return nil
}
