package dispute

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/hookledger/hookledger/custody"
)

// BundleFormat names the layout of an evidence bundle.
const BundleFormat = "hookledger-dispute-bundle/1"

// zipTime stamps every entry, so exporting the same trace twice gives the
// same bytes; the evidence carries its own times.
var zipTime = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// Manifest is manifest.json: the trace, where each event's evidence is in
// the bundle, how to re-verify it, and the digest of every other file.
type Manifest struct {
	Format   string     `json:"format"`
	Target   string     `json:"target"`
	Evidence []Evidence `json:"evidence"`
	// Prices locates each priced invoice's price snapshot; none when no
	// invoice of the trace is priced.
	Prices []PriceFile `json:"prices,omitempty"`
	Files  []File      `json:"files"`
	Trace  *Trace      `json:"trace"`
}

// PriceFile is one invoice's price snapshot in the bundle: the plan
// versions that priced it, byte for byte as stored, so a reader can price
// each line again. SHA256 is the file's digest, PriceDigest the one the
// invoice stored at its close: equal unless the prices were changed since.
type PriceFile struct {
	Invoice     int64  `json:"invoice"`
	Path        string `json:"path"`
	SHA256      string `json:"sha256"`
	PriceDigest string `json:"price_digest"`
	Matches     bool   `json:"matches"`
}

// Evidence locates one event's stored bytes in the bundle.
type Evidence struct {
	Provider         string         `json:"provider"`
	EventID          string         `json:"event_id"`
	Dir              string         `json:"dir"`
	Body             string         `json:"body,omitempty"` // path; empty when pruned
	BodySHA256       string         `json:"body_sha256"`
	SignatureHeaders string         `json:"signature_headers,omitempty"` // path
	Attempts         []AttemptFiles `json:"attempts"`
	Verification     Verification   `json:"verification"`
	Recipe           *Recipe        `json:"recipe,omitempty"`
	NoRecipe         string         `json:"no_recipe,omitempty"` // why there is no recipe
}

// AttemptFiles locates one delivery attempt's signature headers. ID is as
// AttemptView's (left out for the first delivery kept in its receipt).
type AttemptFiles struct {
	ID               int64        `json:"id,omitempty"`
	Outcome          string       `json:"outcome"`
	SignatureHeaders string       `json:"signature_headers"`
	Signature        Verification `json:"signature"`
}

// File is one file of the bundle with its digest.
type File struct {
	Path   string `json:"path"`
	Bytes  int    `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// WriteBundle writes tr as a zip evidence bundle: manifest.json, README.txt,
// SHA256SUMS, and per event its raw body and signature headers exactly as
// stored. Entries are sorted and time-stamped alike, so the same trace always
// gives the same bytes.
func (v *Verifier) WriteBundle(w io.Writer, tr *Trace) error {
	files := map[string][]byte{}
	m := &Manifest{Format: BundleFormat, Target: tr.Target, Trace: tr, Evidence: []Evidence{}}
	width := max(3, len(fmt.Sprint(len(tr.Events))))
	for i, ev := range tr.Events {
		dir := fmt.Sprintf("events/%0*d-%s-%s", width, i+1, safeName(ev.Provider), safeName(ev.EventID))
		e := Evidence{Provider: ev.Provider, EventID: ev.EventID, Dir: dir, Verification: ev.Verification, Attempts: []AttemptFiles{}}
		if ev.Receipt != nil {
			e.BodySHA256 = ev.Receipt.BodySHA256
			e.SignatureHeaders = dir + "/signature-headers.txt"
			files[e.SignatureHeaders] = []byte(ev.Receipt.SignatureHeaders)
			if !ev.Receipt.BodyPruned && !ev.Receipt.BodyMissing {
				e.Body = dir + "/body.raw"
				files[e.Body] = ev.body
			}
		}
		for _, a := range ev.Attempts {
			af := AttemptFiles{ID: a.ID, Outcome: a.Outcome, Signature: a.Signature,
				SignatureHeaders: fmt.Sprintf("%s/attempts/%s-%s.txt", dir, a.Label(), a.Outcome)}
			files[af.SignatureHeaders] = []byte(a.SignatureHeaders)
			e.Attempts = append(e.Attempts, af)
		}
		switch p, ok := v.configs[ev.Provider]; {
		case e.Body == "":
			e.NoRecipe = "the body is not stored: " + ev.Verification.Text
		case custody.Source(ev.Receipt.Source) == custody.SourceAPI:
			e.NoRecipe = "an ingest API event carries no provider signature to recompute: an API key sent it " +
				"(signature-headers.txt names which); its body is checked against its digest (above)"
		case !ok:
			e.NoRecipe = fmt.Sprintf("provider %q is not in the current configuration", ev.Provider)
		default:
			r, err := recipe(p, ev.Receipt.SignatureHeaders, e.Body)
			if err != nil {
				e.NoRecipe = err.Error()
			} else {
				e.Recipe = r
			}
		}
		m.Evidence = append(m.Evidence, e)
	}
	for _, inv := range tr.Invoices {
		if inv.Prices == nil {
			continue
		}
		path := fmt.Sprintf("prices/invoice-%d.json", inv.ID)
		files[path] = inv.Prices
		sum := fileOf(path, inv.Prices).SHA256
		m.Prices = append(m.Prices, PriceFile{Invoice: inv.ID, Path: path, SHA256: sum, PriceDigest: inv.PriceDigest, Matches: sum == inv.PriceDigest})
	}
	files["README.txt"] = readme(m)
	for _, name := range sortedNames(files) {
		m.Files = append(m.Files, fileOf(name, files[name]))
	}
	manifest, err := marshal(m)
	if err != nil {
		return err
	}
	files["manifest.json"] = manifest
	var sums bytes.Buffer
	for _, name := range sortedNames(files) {
		fmt.Fprintf(&sums, "%s  %s\n", fileOf(name, files[name]).SHA256, name)
	}
	files["SHA256SUMS"] = sums.Bytes()

	zw := zip.NewWriter(w)
	for _, name := range sortedNames(files) {
		// Bodies and headers are small: storing them costs little space and
		// spares a compressor per entry.
		method := zip.Store
		if len(files[name]) > 4096 {
			method = zip.Deflate
		}
		fh := &zip.FileHeader{Name: name, Method: method, Modified: zipTime}
		fh.SetMode(0o644)
		f, err := zw.CreateHeader(fh)
		if err != nil {
			return fmt.Errorf("bundle: %s: %w", name, err)
		}
		if _, err := f.Write(files[name]); err != nil {
			return fmt.Errorf("bundle: %s: %w", name, err)
		}
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	return nil
}

func fileOf(name string, b []byte) File {
	sum := sha256.Sum256(b)
	return File{Path: name, Bytes: len(b), SHA256: hex.EncodeToString(sum[:])}
}

func sortedNames(files map[string][]byte) []string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// marshal is indented JSON without HTML escaping: "<t>.<body>" stays readable.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// safeName keeps a path segment portable: letters, digits, dot, dash and
// underscore, at most 48 bytes. The manifest maps it back to the real id.
func safeName(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
			b.WriteByte(c)
		case c == '.' && b.Len() > 0:
			b.WriteByte(c)
		default:
			b.WriteByte('_')
		}
		if b.Len() == 48 {
			break
		}
	}
	if b.Len() == 0 {
		return "_"
	}
	return b.String()
}
