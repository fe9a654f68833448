package custody

import "strings"

// clean makes the delivery's free text storable as text on every backend:
// bytes that are not UTF-8, and NULs, become U+FFFD. It is what a sender
// wrote around the event (its type, user agent, request id, signature
// headers), not the event: the body is kept verbatim, and the event id is
// refused by the receiver when it is not clean (ledger.CheckIdentifier).
// PostgreSQL's text cannot hold either, and an authenticated event must
// not turn into a 503 its sender retries for ever; SQLite stores the same
// text, so both backends keep one value (and one receipt hash).
func (d *Delivery) clean() {
	for _, s := range []*string{&d.EventType, &d.SignatureHeaders, &d.Error,
		&d.Attempt.RemoteAddr, &d.Attempt.UserAgent, &d.Attempt.RequestID} {
		*s = cleanText(*s)
	}
}

func cleanText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	return s
}
