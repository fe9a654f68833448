package dispute

import (
	"bytes"
	"fmt"
	"strings"
)

// readme writes README.txt: what the bundle holds and, per event, the
// openssl commands that re-verify its body with the provider's secret.
func readme(m *Manifest) []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	tr := m.Trace
	p("hookledger dispute evidence bundle")
	p("==================================")
	p("")
	p("Target: %s", m.Target)
	p("")
	p("Files")
	p("  manifest.json    the whole trace as JSON: invoice lines with their digests recomputed, the")
	p("                   ledger rows with their hash-chain check, each event's receipt, every")
	p("                   delivery attempt and hookledger's re-verification; and where each file is")
	p("  README.txt       this file")
	p("  SHA256SUMS       the SHA-256 of every other file; check with: sha256sum -c SHA256SUMS")
	p("  events/NNN-PROVIDER-EVENT/")
	p("    body.raw                 the raw body, byte for byte as received")
	p("    signature-headers.txt    the signature headers it arrived with, one \"Name: value\" a line")
	p("    attempts/ID-OUTCOME.txt  each delivery attempt's own signature headers (retries are")
	p("                             signed afresh); ID \"first\" is the delivery that stored the")
	p("                             receipt, kept in it (it has no attempt id of its own)")
	if len(m.Prices) > 0 {
		p("  prices/invoice-ID.json     the plan versions that priced invoice ID, byte for byte as stored")
		p("                             at its close; its SHA-256 is the invoice's price_digest")
	}
	p("")
	p("What was billed")
	if len(tr.Invoices) == 0 {
		p("  no closed invoice is part of this trace")
	}
	for _, inv := range tr.Invoices {
		p("  invoice %d, customer %s, period %s (%s), digest %s", inv.ID, inv.Customer, inv.Period, inv.TZ, okWord(inv.DigestOK, "matches", "DOES NOT MATCH"))
		if inv.Currency != "" {
			p("    plan %s: fee %s, true-up %s, total %s %s; amounts recomputed from the prices: %s", inv.Plan, inv.Fee, inv.TrueUp, inv.Total, inv.Currency,
				okWord(inv.MoneyOK != nil && *inv.MoneyOK, "match", "DO NOT MATCH"))
		}
		for _, l := range inv.Lines {
			late := ""
			if l.Late {
				late = ", late usage of " + l.Period
			}
			p("    line %d: %s %s%s (%s%s), %d usage rows, %d adjustments, digest %s",
				l.Line, l.Meter+dimension(l.Dimension), l.Quantity, unit(l.Unit), l.Aggregation, late, l.Rows, l.Adjustments, okWord(l.OK, "matches", "DOES NOT MATCH"))
			if l.Amount != "" {
				before := ""
				if l.Late {
					before = ", above " + l.BilledBefore + " billed before"
				}
				p("      amount %s %s (exactly %s), plan version %s%s", l.Amount, l.Currency, l.AmountPrecise, l.PlanVersion, before)
				p("      %s", l.Breakdown)
			}
		}
	}
	s := tr.Summary
	p("  %s, %s, %d events, %s (%s)",
		plural(s.UsageRows, "usage row"), plural(s.Adjustments, "adjustment"), s.Events, plural(s.Attempts, "delivery attempt"), plural(s.Duplicates, "duplicate"))
	p("  bodies: %s; hash chain %s", s.Bodies, okWord(s.ChainOK, "ok", "BROKEN"))
	for _, prob := range s.Problems {
		p("  PROBLEM: %s", prob)
	}
	p("")
	p("How the digests are made")
	p("  Each ledger row's row_hash is SHA-256 over the previous row's row_hash and the row's fields;")
	p("  an invoice line's digest is SHA-256 over its rows' ids (8-byte big-endian) and row_hashes in")
	p("  id order; the invoice digest covers its fields and lines. `hookledger verify` recomputes all")
	p("  of them from the database; manifest.json holds the ids and hashes.")
	if len(m.Prices) > 0 {
		p("")
		p("How the amounts are made")
		p("  prices/invoice-ID.json holds the plan versions that priced the invoice, its own first;")
		p("  `sha256sum prices/invoice-ID.json` prints the invoice's price_digest:")
		for _, pf := range m.Prices {
			p("    %s  %s (invoice %d stores %s: %s)", pf.SHA256, pf.Path, pf.Invoice, pf.PriceDigest, okWord(pf.Matches, "the same", "DIFFERENT"))
		}
		p("  A line is priced by the version whose effective_from is its plan_version, with the price of")
		p("  its meter: amount_precise = price(billed_before + quantity) - price(billed_before), where")
		p("  billed_before is 0 except on a late line (the period's total its earlier invoices billed),")
		p("  and price() is the model's: unit (quantity x unit), graduated (each tier prices the units")
		p("  that fall in it, plus its flat once entered), volume (the tier the whole quantity falls in")
		p("  prices every unit, plus its flat), package (amount per started package of size units,")
		p("  after free units). The amount is amount_precise rounded once to the currency's minor unit,")
		p("  half to even; a late line whose charge holds carry bills price(billed_before + quantity)")
		p("  rounded once (carry.total) less what the period's earlier lines billed (carry.billed), so a")
		p("  period's amounts add up to its total priced once. fee + the period's own amounts + true_up")
		p("  + the late lines' amounts = total,")
		p("  where true_up brings fee + the period's own amounts up to the plan's minimum. Each line's")
		p("  charge in manifest.json shows the price's breakdown; `hookledger verify` recomputes it all.")
	}
	p("")
	p("Checking a body against its recorded digest")
	p("  openssl dgst -sha256 events/<event>/body.raw")
	p("  prints the SHA-256 the receipt recorded when the body arrived (body_sha256 below).")
	p("")
	p("Re-verifying a signature")
	p("  Anyone holding the provider's webhook signing secret can recompute the provider's signature")
	p("  over a stored body with openssl and compare it with the signature the provider sent. In a")
	p("  POSIX shell, in the directory this bundle was unzipped into, read the secret without echoing")
	p("  it or keeping it in the shell history:")
	p("")
	p("      stty -echo; read -r SECRET; stty echo")
	p("")
	p("  then run the commands listed under an event. The line they print must equal one of the")
	p("  event's expected signatures (hex compares case-insensitively). openssl takes the key as an")
	p("  argument, visible to other users of the machine while it runs: use a machine you trust.")
	p("  A secret rotated away since still verifies the bodies it signed: hookledger reports those as")
	p("  not verifiable because it no longer holds that secret, not because the body changed.")
	p("")
	p("  hookledger's verdicts: valid (a current secret verifies the stored body); invalid (the body")
	p("  no longer hashes to the digest recorded on arrival: it was changed); not verifiable (the body")
	p("  is intact but no current secret verifies it, e.g. after a rotation, or it was fetched by")
	p("  reconciliation and never signed); body pruned by retention (only its digest remains).")
	p("  Events of the ingest API (POST /v1/events) carry no provider signature: an API key sent them.")
	p("  hookledger reports them verified by API key when the key recorded on arrival (its id and")
	p("  first characters, in signature-headers.txt; never the key) is a stored key of the event's")
	p("  scope and the body hashes to the digest recorded on arrival, the check above.")
	for i, e := range m.Evidence {
		p("")
		p("Event %d of %d: provider %s, event %s", i+1, len(m.Evidence), e.Provider, e.EventID)
		if e.Body == "" {
			p("  body:       not stored (SHA-256 recorded on arrival: %s)", orNone(e.BodySHA256))
		} else {
			p("  body:       %s (SHA-256 %s)", e.Body, e.BodySHA256)
			p("  headers:    %s", e.SignatureHeaders)
		}
		p("  hookledger: %s", e.Verification.Text)
		if e.Verification.Status == APIKey {
			p("              %s", e.Verification.Detail)
		}
		if e.Recipe == nil {
			p("  no openssl recipe: %s", e.NoRecipe)
			continue
		}
		r := e.Recipe
		p("  scheme:     %s", r.Scheme)
		p("  signed:     %s", r.Signed)
		switch {
		case r.Prefix != "" && r.Suffix != "":
			p("              = %q, the body, then %q", r.Prefix, r.Suffix)
		case r.Prefix != "":
			p("              = %q followed by the body", r.Prefix)
		case r.Suffix != "":
			p("              = the body followed by %q", r.Suffix)
		}
		if r.Key == KeyBase64 {
			p("  key:        the secret without its whsec_ prefix, base64-decoded")
		} else {
			p("  key:        the secret as configured")
		}
		p("  encoding:   %s", r.Encoding)
		p("  expected:   %s (from %s)", strings.Join(r.Signatures, " or "), r.Header)
		p("  commands:")
		for _, c := range r.Commands {
			p("    %s", c)
		}
	}
	return b.Bytes()
}

func okWord(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}

func orNone(s string) string {
	if s == "" {
		return "none (the receipt was deleted by retention)"
	}
	return s
}
