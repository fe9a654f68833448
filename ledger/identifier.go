package ledger

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxIdentifierBytes is the longest event id, customer id or meter name
// hookledger keeps, in bytes of UTF-8, on both backends. An identifier is a
// key: PostgreSQL's btree indexes refuse an entry longer than about 2.7 KB,
// and (provider, event_id, meter) share one entry, so a longer id could
// never be stored there, and every retry of it would fail the same way.
// Refusing it up front makes it bad input (a 4xx, a failed mapping), never
// a storage error. SQLite has no such bound; a ledger written before the
// limit keeps its longer ids and copies to PostgreSQL all the same (its
// indexes hold digests of the keys: migration 0011).
const MaxIdentifierBytes = 1024

// CheckIdentifier refuses an identifier (customer id, meter name, event id) that is not clean text.
// Such ids print like other ids or not at all: "cus_\xff" shows as "cus_\ufffd", a NUL vanishes
// from a terminal and lands raw in CSV. So they never reach the ledger or a receipt key: a mapping
// that extracts one fails (the receipt keeps the reason), an event id of that kind is refused.
//
// Refused: longer than MaxIdentifierBytes; bytes that are not UTF-8; only spaces (" ", which prints as nothing); control characters (C0 U+0000-U+001F, DEL U+007F, C1
// U+0080-U+009F); and U+FFFD, which is what decoders put in place of bytes they could not read
// (encoding/json for "\xff", gjson for a lone surrogate escape such as "\ud800"), so an id holding
// it cannot be told from the one it was made from.
func CheckIdentifier(s string) error {
	if len(s) > MaxIdentifierBytes {
		return fmt.Errorf("is %d bytes, longer than the %d bytes an identifier may have", len(s), MaxIdentifierBytes)
	}
	if !utf8.ValidString(s) {
		return errors.New("is not valid UTF-8")
	}
	if s != "" && strings.Trim(s, " ") == "" {
		return errors.New("is only spaces")
	}
	for _, r := range s {
		switch {
		case r < 0x20, 0x7f <= r && r <= 0x9f:
			return fmt.Errorf("contains a control character (%U)", r)
		case r == utf8.RuneError:
			return errors.New("contains U+FFFD, the replacement character (for a character lost before it reached hookledger)")
		}
	}
	return nil
}
