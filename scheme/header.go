package scheme

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"time"
)

// Each scheme has one parser for its header format (parseStripe, parseStandard, …). Verify calls
// it to authenticate a delivery, Recipe to explain a stored one, and the tests hold Sign's output
// to it; so a header format is read in exactly one place.

// maxSigs bounds the candidate signatures one header may carry. Senders list one per active secret,
// so a handful is plenty; the bound keeps parsing allocation-free and caps a hostile header's cost.
const maxSigs = 8

// parsed is one delivery's signature headers as its scheme's parser read them. The strings are
// sub-slices of the header values, so parsing for Verify copies and allocates nothing.
type parsed struct {
	t     string    // the signed timestamp as sent; "" for schemes without one
	ts    time.Time // t as a time, once it parsed
	hasTS bool
	id    string // the signed id, for schemes that sign one
	n     int    // how many candidate signatures the header carries
	// sigs are the candidate signatures, still encoded, prefixes removed; kept only when parsing
	// for Recipe (Verify keeps them decoded, in verifying.dec).
	sigs []string
}

// verifying is what a parser checks beyond the header's structure when Verify calls it: each
// signature is decoded into dec and the timestamp's age is checked, at the point of the header
// where that error belongs. Recipe parses with a nil *verifying: it explains a stored header, and
// whether a signature decodes and matches is for whoever recomputes the MAC.
type verifying struct {
	now       time.Time
	tolerance time.Duration
	dec       sigSet
}

// sig records one encoded signature and, when verifying, decodes it.
func (p *parsed) sig(enc encoding, s string, v *verifying) error {
	if p.n == maxSigs {
		return fmt.Errorf("more than %d signatures: %w", maxSigs, ErrMalformedSignature)
	}
	if v != nil {
		if err := v.dec.add(enc, s); err != nil {
			return err
		}
	} else {
		p.sigs = append(p.sigs, s)
	}
	p.n++
	return nil
}

// timestamp records the signed timestamp t and, when verifying, checks its age. A t that parses
// is kept even when it is outside the tolerance, so Verify can report the skew.
func (p *parsed) timestamp(t string, v *verifying) error {
	ts, err := parseUnix(t)
	if err != nil {
		return err
	}
	p.t, p.ts, p.hasTS = t, ts, true
	if v == nil {
		return nil
	}
	return checkAge(ts, v.now, v.tolerance)
}

// result ends every Verify: the parser's error, or whether any key's MAC over pre || body || post
// is among the decoded signatures. ts and hasTS go with either, as Verify documents.
func (v *verifying) result(p *parsed, err error, keys [][]byte, pre, body, post []byte) (time.Time, bool, error) {
	if err == nil {
		err = matchAny(keys, pre, body, post, &v.dec)
	}
	return p.ts, p.hasTS, err
}

type encoding int

const (
	hexEncoding encoding = iota
	base64Encoding
)

// strictBase64 rejects non-zero padding bits, which would give one MAC several spellings; the
// reference implementations compare the encoded text, so they reject those too.
var strictBase64 = base64.StdEncoding.Strict()

// sigSet holds the decoded candidate signatures of one delivery; parsed.sig bounds it.
type sigSet struct {
	n int
	v [maxSigs][sha256.Size]byte
}

// add decodes one encoded HMAC-SHA256. Anything that is not exactly one digest is malformed, which
// is also the length check that makes the later hmac.Equal meaningful.
func (s *sigSet) add(enc encoding, src string) error {
	dst := &s.v[s.n]
	switch enc {
	case hexEncoding:
		if !decodeHex(dst, src) {
			return fmt.Errorf("signature is not %d hex digits: %w", 2*sha256.Size, ErrMalformedSignature)
		}
	case base64Encoding:
		var buf [sha256.Size + 1]byte // DecodedLen of 44 characters is 33
		if len(src) != base64.StdEncoding.EncodedLen(sha256.Size) {
			return fmt.Errorf("signature is not a base64 SHA-256 digest: %w", ErrMalformedSignature)
		}
		n, err := strictBase64.Decode(buf[:], []byte(src))
		if err != nil || n != sha256.Size {
			return fmt.Errorf("signature is not a base64 SHA-256 digest: %w", ErrMalformedSignature)
		}
		copy(dst[:], buf[:n])
	}
	s.n++
	return nil
}

// decodeHex works on the header string directly; hex.Decode would need a []byte copy of it.
func decodeHex(dst *[sha256.Size]byte, s string) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, ok1 := unhex(s[2*i])
		lo, ok2 := unhex(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// parseUnix accepts plain decimal seconds, the only form providers send; strconv.ParseInt alone
// would also take a sign, and a negative or signed timestamp is a malformed header, not a stale one.
func parseUnix(s string) (time.Time, error) {
	if s == "" || len(s) > 18 {
		return time.Time{}, fmt.Errorf("timestamp %.20q is not unix seconds: %w", s, ErrMalformedSignature)
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return time.Time{}, fmt.Errorf("timestamp %.20q is not unix seconds: %w", s, ErrMalformedSignature)
		}
	}
	n, _ := strconv.ParseInt(s, 10, 64) // cannot fail: at most 18 digits
	return time.Unix(n, 0), nil
}

// checkAge rejects timestamps too far in the past or the future: a delivery signed "ahead" would
// otherwise stay replayable for longer than the tolerance. time.Time.Sub saturates, so absurd
// timestamps cannot overflow into acceptance.
func checkAge(ts, now time.Time, tolerance time.Duration) error {
	if tolerance < 0 {
		return nil
	}
	switch age := now.Sub(ts); {
	case age > tolerance:
		return fmt.Errorf("signed %s ago: %w", age, ErrTimestamp)
	case age < -tolerance:
		return fmt.Errorf("signed %s in the future: %w", ts.Sub(now), ErrTimestamp)
	}
	return nil
}

// missing reports an absent required header.
func missing(header string) error {
	return fmt.Errorf("%s: %w", header, ErrMissingSignature)
}

// unixString is the timestamp Sign puts in a header.
func unixString(now time.Time) string { return strconv.FormatInt(now.Unix(), 10) }
