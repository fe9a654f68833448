package dispute

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/receiver"
	"github.com/hookledger/hookledger/scheme"
)

// seedAllSchemes has cus_1 send October usage through every scheme; the
// acme event id needs shell quoting and a safe file name, stripe's event is
// delivered twice, and one default event's body is pruned.
func seedAllSchemes(t *testing.T) *env {
	e := newEnv(t)
	e.lag = 3 * time.Second
	ids := map[string]string{"default": "msg_2Kx9", "stripe": "evt_1QabcD", "github": "5f1e0c2a-8b7d-11ef-9a3c-1e2d3c4b5a69",
		"shopify": "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", "slack": "Ev08MFMKH6", "acme": "it's/evt 1"}
	for i, p := range providerNames {
		e.send(p, ids[p], "cus_1", "1.25", "2026-10-0"+string(rune('1'+i))+"T08:00:00Z")
		e.Clock.Add(time.Minute)
	}
	e.Clock.Add(10 * time.Minute)
	if code := e.deliver("stripe", ids["stripe"], body("stripe", ids["stripe"], "cus_1", "api_requests", "1.25", "2026-10-02T08:00:00Z")); code != 200 {
		t.Fatalf("stripe retry: %d", code)
	}
	e.send("default", "msg_pruned", "cus_1", "2", "2026-10-09T08:00:00Z")
	e.PruneBody("default", "msg_pruned")
	e.Clock.Set(time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC))
	e.close("2026-10")
	return e
}

func exportBundle(t *testing.T, e *env, target string) []byte {
	t.Helper()
	tracer := e.tracer(nil)
	tr, err := tracer.Trace(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := tracer.Verifier.WriteBundle(&buf, tr); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// unzip writes the bundle's files under a new directory.
func unzip(t *testing.T, b []byte) string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		var data bytes.Buffer
		data.ReadFrom(rc)
		rc.Close()
		path := filepath.Join(dir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestBundleIsDeterministic(t *testing.T) {
	e := seedAllSchemes(t)
	a := exportBundle(t, e, "invoice:1")
	b := exportBundle(t, e, "invoice:1")
	if !bytes.Equal(a, b) {
		t.Fatalf("two exports differ (%d and %d bytes)", len(a), len(b))
	}
	zr, err := zip.NewReader(bytes.NewReader(a), int64(len(a)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
		if !f.Modified.Equal(zipTime) {
			t.Errorf("%s stamped %s", f.Name, f.Modified)
		}
	}
	if !slices.IsSorted(names) || !slices.Contains(names, "manifest.json") || !slices.Contains(names, "README.txt") ||
		!slices.Contains(names, "SHA256SUMS") {
		t.Errorf("entries %v", names)
	}
	// Later deliveries change the evidence, and so the bundle.
	e.Clock.Add(time.Hour)
	if code := e.deliver("github", "5f1e0c2a-8b7d-11ef-9a3c-1e2d3c4b5a69",
		body("github", "", "cus_1", "api_requests", "1.25", "2026-10-03T08:00:00Z")); code != 200 {
		t.Fatalf("github retry: %d", code)
	}
	if c := exportBundle(t, e, "invoice:1"); bytes.Equal(a, c) {
		t.Errorf("a new delivery attempt did not change the bundle")
	}
}

// TestBundleReverifiesFromItsOwnFiles checks every body using only the
// unzipped files and the secrets: the digests, the scheme's own verifier
// over the stored headers, an independent HMAC from the manifest's recipe,
// and the README's openssl commands run in a shell.
func TestBundleReverifiesFromItsOwnFiles(t *testing.T) {
	e := seedAllSchemes(t)
	dir := unzip(t, exportBundle(t, e, "invoice:1"))
	read := func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	// SHA256SUMS covers every other file.
	sums := bufio.NewScanner(bytes.NewReader(read("SHA256SUMS")))
	listed := 0
	for sums.Scan() {
		sum, name, _ := strings.Cut(sums.Text(), "  ")
		got := sha256.Sum256(read(name))
		if hex.EncodeToString(got[:]) != sum {
			t.Errorf("SHA256SUMS: %s does not match", name)
		}
		listed++
	}
	var m Manifest
	if err := json.Unmarshal(read("manifest.json"), &m); err != nil {
		t.Fatal(err)
	}
	if m.Format != BundleFormat || m.Target != "invoice:1" || listed != len(m.Files)+1 {
		t.Fatalf("manifest %s %s, %d files listed, %d in manifest", m.Format, m.Target, listed, len(m.Files))
	}

	opts := map[string]scheme.HMACOptions{}
	for _, p := range e.Config.Providers {
		opts[p.Name] = p.HMAC
	}
	verified := map[string]bool{}
	for _, ev := range m.Evidence {
		if ev.EventID == "msg_pruned" {
			if ev.Body != "" || ev.Recipe != nil || ev.Verification.Status != Pruned {
				t.Errorf("pruned event: %+v", ev)
			}
			continue
		}
		body := read(ev.Body)
		if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != ev.BodySHA256 {
			t.Errorf("%s: body does not hash to body_sha256", ev.EventID)
		}
		secret := secrets[ev.Provider]
		sch, err := scheme.New(ev.Recipe.Scheme, opts[ev.Provider])
		if err != nil {
			t.Fatal(err)
		}
		key, err := sch.Key(secret)
		if err != nil {
			t.Fatal(err)
		}
		headers := read(ev.SignatureHeaders)
		if _, _, err := sch.Verify(receiver.ParseSignatureHeaders(string(headers)), body, [][]byte{key}, time.Time{}, -1); err != nil {
			t.Errorf("%s: the stored headers do not verify the stored body: %v", ev.EventID, err)
		}
		for _, a := range ev.Attempts {
			h := receiver.ParseSignatureHeaders(string(read(a.SignatureHeaders)))
			if _, _, err := sch.Verify(h, body, [][]byte{key}, time.Time{}, -1); err != nil {
				t.Errorf("%s attempt %d: %v", ev.EventID, a.ID, err)
			}
		}
		// The recipe, computed independently of the scheme code.
		r := ev.Recipe
		rkey := []byte(secret)
		if r.Key == KeyBase64 {
			if rkey, err = base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_")); err != nil {
				t.Fatal(err)
			}
		}
		mac := hmac.New(sha256.New, rkey)
		mac.Write([]byte(r.Prefix))
		mac.Write(body)
		mac.Write([]byte(r.Suffix))
		got := hex.EncodeToString(mac.Sum(nil))
		if r.Encoding == "base64" {
			got = base64.StdEncoding.EncodeToString(mac.Sum(nil))
		}
		if !slices.Contains(r.Signatures, got) {
			t.Errorf("%s (%s): recipe HMAC %s is not among %v", ev.EventID, r.Scheme, got, r.Signatures)
		}
		for _, sig := range r.Signatures {
			if !bytes.Contains(headers, []byte(sig)) {
				t.Errorf("%s: signature %s is not in the stored headers", ev.EventID, sig)
			}
		}
		verified[r.Scheme] = true
	}
	if len(verified) != 6 {
		t.Errorf("verified schemes %v; want all six", verified)
	}

	t.Run("openssl", func(t *testing.T) {
		if _, err := exec.LookPath("openssl"); err != nil {
			t.Skip("openssl is not on PATH")
		}
		blocks := readmeBlocks(t, read("README.txt"))
		if len(blocks) != 6 {
			t.Fatalf("README has %d command blocks; want 6", len(blocks))
		}
		for _, b := range blocks {
			if got := runShell(t, dir, b.commands, secrets[b.provider]); !matchesAny(got, b.expected) {
				t.Errorf("%s/%s: openssl printed %q; README expects one of %v\n%s", b.provider, b.event, got, b.expected, strings.Join(b.commands, "\n"))
			}
			// Controls: the wrong secret, or a changed body, must not match.
			if got := runShell(t, dir, b.commands, wrong(secrets[b.provider])); matchesAny(got, b.expected) {
				t.Errorf("%s/%s: a wrong secret still matches", b.provider, b.event)
			}
		}
		first := blocks[0]
		bodyPath := filepath.Join(dir, "events")
		entries, _ := os.ReadDir(bodyPath)
		path := filepath.Join(bodyPath, entries[0].Name(), "body.raw")
		orig, _ := os.ReadFile(path)
		os.WriteFile(path, bytes.Replace(orig, []byte("1.25"), []byte("12.5"), 1), 0o644)
		if got := runShell(t, dir, first.commands, secrets[first.provider]); matchesAny(got, first.expected) {
			t.Errorf("a changed body still verifies: %s", got)
		}
	})
}

// wrong changes a secret's last character (appending one would not do for
// base64 secrets: openssl ignores an incomplete trailing group).
func wrong(secret string) string {
	last := byte('A')
	if secret[len(secret)-1] == 'A' {
		last = 'B'
	}
	return secret[:len(secret)-1] + string(last)
}

type readmeBlock struct {
	provider, event string
	expected        []string
	commands        []string
}

// readmeBlocks reads each event's expected signatures and commands the way
// a person would follow the README.
func readmeBlocks(t *testing.T, readme []byte) []readmeBlock {
	var out []readmeBlock
	var cur *readmeBlock
	inCommands := false
	for line := range strings.SplitSeq(string(readme), "\n") {
		switch {
		case strings.HasPrefix(line, "Event "):
			out = append(out, readmeBlock{})
			cur, inCommands = &out[len(out)-1], false
			_, rest, _ := strings.Cut(line, ": provider ")
			cur.provider, cur.event, _ = strings.Cut(rest, ", event ")
		case cur == nil:
		case strings.HasPrefix(line, "  expected:"):
			sigs, _, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, "  expected:")), " (from ")
			cur.expected = strings.Split(sigs, " or ")
		case line == "  commands:":
			inCommands = true
		case inCommands && strings.HasPrefix(line, "    "):
			cur.commands = append(cur.commands, strings.TrimPrefix(line, "    "))
		default:
			inCommands = false
		}
	}
	var blocks []readmeBlock
	for _, b := range out {
		if len(b.commands) > 0 {
			if len(b.expected) == 0 {
				t.Errorf("%s/%s: commands without expected signatures", b.provider, b.event)
			}
			blocks = append(blocks, b)
		}
	}
	return blocks
}

func runShell(t *testing.T, dir string, commands []string, secret string) string {
	t.Helper()
	cmd := exec.Command("sh", "-c", strings.Join(commands, "\n"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SECRET="+secret)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sh: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func matchesAny(got string, expected []string) bool {
	for _, e := range expected {
		if strings.EqualFold(got, e) {
			return true
		}
	}
	return false
}

// The export of a customer's period has every event of the period too.
func TestCustomerBundle(t *testing.T) {
	e := seedAllSchemes(t)
	p, _ := ledger.MonthPeriod("2026-10", time.UTC)
	tracer := e.tracer(nil)
	tr, err := tracer.Customer(context.Background(), "cus_1", p)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := tracer.Verifier.WriteBundle(&buf, tr); err != nil {
		t.Fatal(err)
	}
	dir := unzip(t, buf.Bytes())
	var m Manifest
	b, _ := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.Target != "customer:cus_1@2026-10" || len(m.Evidence) != 7 || m.Trace.Summary.Attempts != 8 {
		t.Errorf("target %s, %d events, %d attempts", m.Target, len(m.Evidence), m.Trace.Summary.Attempts)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestBundleWriteError(t *testing.T) {
	e := seedLine(t)
	tracer := e.tracer(nil)
	tr, err := tracer.Trace(context.Background(), "invoice:1/1")
	if err != nil {
		t.Fatal(err)
	}
	if err := tracer.Verifier.WriteBundle(failWriter{}, tr); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("WriteBundle to a failing writer: %v", err)
	}
}
