package ops_test

// End-to-end tests of the webhook listener's bounds against the built
// binary: request framing (RFC 9112 §6.3), bodies refused before they are
// read, the body deadline from limits.body_timeout, and (behind
// HOOKLEDGER_TEST_SLOW_SENDERS=1, it takes half a minute) serve's memory
// under 2,000 stalled senders. HOOKLEDGER_TEST_BINARY runs them against
// another build instead of this tree's.

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/bench"
	"github.com/hookledger/hookledger/e2e/internal/e2e"
	"github.com/hookledger/hookledger/internal/testenv"
)

// rawDelivery is a signed default-provider delivery, written byte for byte:
// framing is "length", or "both" (Content-Length and chunked).
func rawDelivery(t *testing.T, id, framing string) string {
	t.Helper()
	body := `{"type":"usage.recorded","data":{"customer":"cus_1","meter":"api","quantity":1,"occurred_at":"2026-11-29T10:00:00Z"}}`
	h := http.Header{}
	if err := testenv.SignStandard(h, e2e.Secret, id, "", []byte(body), time.Now()); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("POST /webhooks/default HTTP/1.1\r\nHost: hooks.example\r\nContent-Type: application/json\r\n")
	for k, vs := range h {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	if framing == "both" {
		fmt.Fprintf(&b, "Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(body), body)
	} else {
		b.WriteString("\r\n" + body)
	}
	return b.String()
}

// exchange writes req on c and reads one response; closed reports whether
// the server then closed the connection (the read after it ends, rather than
// waiting out the guard deadline, which only keeps a broken server from
// hanging the test).
func exchange(t *testing.T, c net.Conn, req string) (code int, closed bool) {
	t.Helper()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = br.ReadByte()
	var ne net.Error
	return resp.StatusCode, err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

func countRows(t *testing.T, dbPath, table string) int {
	t.Helper()
	var n int
	if err := e2e.OpenRO(t, dbPath).QueryRow(`SELECT COUNT(*) FROM ` + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestWebhookListenerBounds(t *testing.T) {
	bin := os.Getenv("HOOKLEDGER_TEST_BINARY") // e.g. an older build, to see it fail
	if bin == "" {
		bin = testenv.Binary(t)
	}
	env := []string{"HOOKLEDGER_SECRET=" + e2e.Secret}

	t.Run("content-length with transfer-encoding", func(t *testing.T) {
		dir := t.TempDir()
		cmd, stderr, url := testenv.StartServe(t, bin, dir, env)
		c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Correctly signed: only the framing is wrong.
		if code, closed := exchange(t, c, rawDelivery(t, "evt_both", "both")); code != 400 || !closed {
			t.Errorf("both headers: %d, connection closed %v; want 400 and closed", code, closed)
		}
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		db := filepath.Join(dir, "data", "hookledger.db")
		if r, a := countRows(t, db, "receipts"), testenv.CountAttempts(t, db, nil); r != 0 || a != 0 {
			t.Errorf("%d receipts, %d attempts written for a refused request\n%s", r, a, stderr)
		}
	})

	t.Run("content-length with transfer-encoding over TLS", func(t *testing.T) {
		dir := t.TempDir()
		certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
		cert := writeCert(t, certFile, keyFile, 7)
		_, _, url := testenv.StartServe(t, bin, dir, env, "--tls-cert", certFile, "--tls-key", keyFile)
		roots := x509.NewCertPool()
		roots.AddCert(cert)
		c, err := tls.Dial("tcp", strings.TrimPrefix(url, "https://"), &tls.Config{RootCAs: roots, NextProtos: []string{"h2", "http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if p := c.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
			t.Errorf("ALPN negotiated %q, want http/1.1", p)
		}
		if code, closed := exchange(t, c, rawDelivery(t, "evt_tls_ok", "length")); code != 200 || closed {
			t.Errorf("HTTPS delivery: %d, closed %v", code, closed)
		}
		c2, err := tls.Dial("tcp", strings.TrimPrefix(url, "https://"), &tls.Config{RootCAs: roots})
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		if code, closed := exchange(t, c2, rawDelivery(t, "evt_tls_both", "both")); code != 400 || !closed {
			t.Errorf("both headers over TLS: %d, connection closed %v; want 400 and closed", code, closed)
		}
	})

	t.Run("declared body over max_body is refused unread", func(t *testing.T) {
		_, _, url := testenv.StartServe(t, bin, t.TempDir(), env)
		c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Headers only: the answer must not wait for a body that never comes.
		code, closed := exchange(t, c, "POST /webhooks/default HTTP/1.1\r\nHost: x\r\nContent-Length: 1073741824\r\n\r\n")
		if code != 413 || !closed {
			t.Errorf("%d, closed %v; want 413 and closed", code, closed)
		}
	})

	t.Run("limits.body_timeout cuts a stalled body", func(t *testing.T) {
		dir := t.TempDir()
		cfg := opsConfig(t, dir, "limits:\n  body_timeout: 1s\n  max_connections: 100\n  body_budget: 1048576\n")
		_, _, url := testenv.StartServe(t, bin, dir, nil, "--config", cfg)
		c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		code, closed := exchange(t, c, "POST /webhooks/acme HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"partial\":")
		if code != 408 || !closed {
			t.Errorf("%d, closed %v; want 408 and closed (the generic read timeout is 30 s)", code, closed)
		}
	})

	t.Run("2,000 stalled senders", func(t *testing.T) {
		if os.Getenv("HOOKLEDGER_TEST_SLOW_SENDERS") == "" {
			t.Skip("set HOOKLEDGER_TEST_SLOW_SENDERS=1 (takes about 30 s; needs ulimit -n above 2,000)")
		}
		cmd, _, url := testenv.StartServe(t, bin, t.TempDir(), env)
		st, err := bench.Stall{Addr: strings.TrimPrefix(url, "http://"), Conns: 2000, Send: 262000, Declare: 262144}.Open(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second) // let the senders' bytes arrive; nothing is asserted about time
		code, body, err := e2e.TryPost(url, "evt_during_flood")
		if err != nil || code != 200 {
			t.Errorf("signed delivery during the flood: %d %s %v", code, body, err)
		}
		time.Sleep(12 * time.Second) // past the 10 s body deadline, when the budget turns over
		hwm := vmHWM(t, cmd.Process.Pid)
		t.Logf("VmHWM %d MB; stalled connections: %v", hwm>>10, st.Close())
		if hwm > 200<<10 {
			t.Errorf("serve's peak RSS was %d MB with 2,000 stalled senders, want under 200 MB", hwm>>10)
		}
	})
}

// vmHWM is a process's peak resident set in KiB.
func vmHWM(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return kb
		}
	}
	t.Fatal("no VmHWM")
	return 0
}
