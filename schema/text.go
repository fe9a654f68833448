package schema

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// CheckText refuses text that no backend can store as text: bytes that are
// not UTF-8, and NUL. PostgreSQL's text refuses both (its transaction
// aborts) where SQLite's stores them; ledger.CheckText holds everything
// hookledger is given to keep to this rule, and copy every text it moves.
func CheckText(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("is not valid UTF-8")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return errors.New("contains a NUL (U+0000), which stored text cannot hold")
	}
	return nil
}

// UnmovableRowError is a row copy cannot move to PostgreSQL: one of its
// text columns holds what PostgreSQL's text cannot (CheckText). Such a row
// was stored by a hookledger that did not refuse that text yet, on SQLite.
type UnmovableRowError struct {
	Table  string
	Row    string // its key: "id 7", "provider default, event_id evt_1"
	Column string
	Where  string // which byte: "a byte that is not UTF-8 (0xff) at offset 12"
}

func (e *UnmovableRowError) Error() string {
	return fmt.Sprintf("%s row %s: its %s holds %s, which PostgreSQL's text cannot store. "+
		"copy moves every row as stored and hookledger changes no row of its history (ledger rows are hashed into "+
		"its chain), so this ledger cannot move to PostgreSQL as it is: keep serving it from SQLite, where it "+
		"works as before (such text is now refused where it is given, so no new row holds it); "+
		"docs/postgres.md, \"A row copy cannot move\"", e.Table, e.Row, e.Column, e.Where)
}

// badTextAt describes the first byte of s that CheckText refuses.
func badTextAt(s string) string {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			return fmt.Sprintf("a byte that is not UTF-8 (0x%02x) at offset %d", s[i], i)
		case r == 0:
			return fmt.Sprintf("a NUL (U+0000) at offset %d", i)
		}
		i += n
	}
	return ""
}
