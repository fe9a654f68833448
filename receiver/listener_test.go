package receiver_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/receiver"
)

// listen serves e's receiver the way serve does: Listen, then an
// http.Server from NewHTTPServer. It returns the address.
func (e *env) listen(opts receiver.ListenOptions) string {
	e.T.Helper()
	addr, _ := e.serve(opts)
	return addr
}

// serve is listen that also returns the http.Server.
func (e *env) serve(opts receiver.ListenOptions) (string, *http.Server) {
	e.T.Helper()
	ln, err := receiver.Listen("127.0.0.1:0", opts)
	if err != nil {
		e.T.Fatal(err)
	}
	mux := http.NewServeMux()
	e.Server.Routes(mux)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	hs := receiver.NewHTTPServer(mux, e.Server.Log)
	go hs.Serve(ln)
	e.T.Cleanup(func() { hs.Close() }) // before e.close: registered later
	return ln.Addr().String(), hs
}

// rawConn is a client connection that writes bytes exactly as given.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

// hangGuard only keeps a broken server from hanging the test; nothing is
// asserted about how long anything takes.
const hangGuard = 20 * time.Second

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return newRawConn(t, c)
}

// dialTLS is dialRaw over TLS, trusting any certificate. The handshake
// waits for the first write or read, under the connection's deadline.
func dialTLS(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return newRawConn(t, tls.Client(c, &tls.Config{InsecureSkipVerify: true}))
}

func newRawConn(t *testing.T, c net.Conn) *rawConn {
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(hangGuard))
	return &rawConn{t: t, c: c, br: bufio.NewReader(c)}
}

func (r *rawConn) write(s string) {
	r.t.Helper()
	if _, err := io.WriteString(r.c, s); err != nil {
		r.t.Fatal(err)
	}
}

// response reads one response, body included.
func (r *rawConn) response() (*http.Response, string) {
	r.t.Helper()
	resp, err := http.ReadResponse(r.br, nil)
	if err != nil {
		r.t.Fatalf("reading a response: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		r.t.Fatalf("reading a response body: %v", err)
	}
	return resp, string(b)
}

// closedByServer reports whether the server closed the connection: the
// next read ends (EOF or reset) instead of waiting for the hang guard.
func (r *rawConn) closedByServer() bool {
	r.t.Helper()
	_, err := r.br.ReadByte()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return err != nil
}

// delivery is a signed delivery's request text with the given framing:
// "length" (Content-Length), "chunked", or "both".
func (e *env) delivery(id string, body []byte, framing string) string {
	var b strings.Builder
	b.WriteString("POST /webhooks/default HTTP/1.1\r\nHost: hooks.example\r\nContent-Type: application/json\r\n")
	for k, vs := range e.SignDefault(id, body) {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	if framing == "length" || framing == "both" {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	if framing == "chunked" || framing == "both" {
		b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		fmt.Fprintf(&b, "%x\r\n%s\r\n0\r\n\r\n", len(body), body)
		return b.String()
	}
	b.WriteString("\r\n")
	b.Write(body)
	return b.String()
}

func (e *env) stored(id string) bool {
	var n int
	if err := e.DB.Read.Get(&n, `SELECT COUNT(*) FROM receipts WHERE event_id = ?`, id); err != nil {
		e.T.Fatal(err)
	}
	return n == 1
}

// RFC 9112 §6.3: a request with both Content-Length and Transfer-Encoding
// is refused, even correctly signed, and its connection is closed; requests
// before it on the same connection are served.
func TestContentLengthWithTransferEncodingIsRefusedAndClosed(t *testing.T) {
	e := newEnv(t)
	addr := e.listen(receiver.ListenOptions{})
	body := testenv.UsageBody("cus_1", "api", "1")

	c := dialRaw(t, addr)
	c.write(e.delivery("evt_both", body, "both"))
	resp, text := c.response()
	if resp.StatusCode != 400 || !resp.Close || !strings.Contains(text, "Content-Length and Transfer-Encoding") {
		t.Errorf("both headers: %d (close %v) %s", resp.StatusCode, resp.Close, text)
	}
	if !c.closedByServer() {
		t.Error("the connection stayed open after a request with both headers")
	}
	if got := e.Rows(); got != [3]int{0, 0, 0} {
		t.Errorf("receipts, attempts, usage rows = %v, want nothing written", got)
	}

	// Pipelined behind a good request on one connection: the good one is
	// stored, the second refused, the connection closed.
	c = dialRaw(t, addr)
	c.write(e.delivery("evt_first", body, "length") + e.delivery("evt_smuggled", testenv.UsageBody("cus_2", "api", "9"), "both"))
	if resp, text := c.response(); resp.StatusCode != 200 || resp.Close {
		t.Errorf("first request: %d (close %v) %s", resp.StatusCode, resp.Close, text)
	}
	if resp, _ := c.response(); resp.StatusCode != 400 || !resp.Close {
		t.Errorf("pipelined request with both headers: %d (close %v)", resp.StatusCode, resp.Close)
	}
	if !c.closedByServer() {
		t.Error("the connection stayed open after the pipelined request with both headers")
	}
	if !e.stored("evt_first") || e.stored("evt_smuggled") {
		t.Errorf("stored: evt_first %v, evt_smuggled %v; want only evt_first", e.stored("evt_first"), e.stored("evt_smuggled"))
	}
}

// Content-Length requests keep their connection; a chunked one is served and
// then closes it (the scan does not follow chunked bodies).
func TestFramingKeepsContentLengthConnections(t *testing.T) {
	e := newEnv(t)
	addr := e.listen(receiver.ListenOptions{})
	c := dialRaw(t, addr)
	for _, id := range []string{"evt_k1", "evt_k2"} {
		c.write(e.delivery(id, testenv.UsageBody("cus_1", "api", "1"), "length"))
		if resp, text := c.response(); resp.StatusCode != 200 || resp.Close {
			t.Fatalf("%s: %d (close %v) %s", id, resp.StatusCode, resp.Close, text)
		}
	}
	c.write("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, _ := c.response(); resp.StatusCode != 200 {
		t.Errorf("third request on the kept connection: %d", resp.StatusCode)
	}

	c = dialRaw(t, addr)
	c.write(e.delivery("evt_chunked", testenv.UsageBody("cus_1", "api", "1"), "chunked"))
	if resp, text := c.response(); resp.StatusCode != 200 || !resp.Close {
		t.Errorf("chunked: %d (close %v) %s", resp.StatusCode, resp.Close, text)
	}
	if !c.closedByServer() || !e.stored("evt_chunked") {
		t.Error("a chunked delivery is stored and its connection closed")
	}
}

// A declared body over max_body is refused before a byte of it is read.
func TestOversizedContentLengthIsRefusedUnread(t *testing.T) {
	e := newEnv(t)
	addr := e.listen(receiver.ListenOptions{})
	c := dialRaw(t, addr)
	// Headers only: the server must answer without waiting for the body.
	c.write(fmt.Sprintf("POST /webhooks/default HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", 1<<30))
	resp, text := c.response()
	if resp.StatusCode != 413 || !resp.Close {
		t.Errorf("%d (close %v) %s", resp.StatusCode, resp.Close, text)
	}
	if !c.closedByServer() {
		t.Error("connection left open")
	}
	if got := e.Rows(); got != [3]int{0, 0, 0} {
		t.Errorf("counts %v, want nothing written", got)
	}
}

// A stalled body is cut at BodyTimeout, well before the server's 30 s read
// timeout, with 408 and the connection closed.
func TestStalledBodyIsCutAtBodyTimeout(t *testing.T) {
	e := newEnv(t)
	e.Server.BodyTimeout = 200 * time.Millisecond
	addr := e.listen(receiver.ListenOptions{})
	body := testenv.UsageBody("cus_1", "api", "1")
	full := e.delivery("evt_stalled", body, "length")
	c := dialRaw(t, addr)
	c.write(full[:len(full)-10]) // all but the last 10 body bytes, then nothing
	resp, text := c.response()
	if resp.StatusCode != 408 || !resp.Close || !strings.Contains(text, "200ms") {
		t.Errorf("%d (close %v) %s", resp.StatusCode, resp.Close, text)
	}
	if !c.closedByServer() {
		t.Error("connection left open")
	}
	if got := e.Rows(); got != [3]int{0, 0, 0} {
		t.Errorf("counts %v, want nothing written", got)
	}
}

// The connection cap holds further connections in the accept queue while
// the open ones are busy; they are served once a slot frees.
func TestMaxConnections(t *testing.T) {
	e := newEnv(t)
	addr := e.listen(receiver.ListenOptions{MaxConnections: 1})
	first := dialRaw(t, addr)
	// The head not finished: the connection is busy, not idle.
	first.write("GET /healthz HTTP/1.1\r\nHost: x\r\n")
	second := dialRaw(t, addr) // the kernel completes the handshake; serve does not accept yet
	second.write("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	got := make(chan int, 1)
	go func() {
		resp, err := http.ReadResponse(second.br, nil)
		if err != nil {
			got <- 0
			return
		}
		got <- resp.StatusCode
	}()
	select {
	case code := <-got:
		t.Fatalf("second connection served (%d) while the only slot was taken", code)
	case <-time.After(300 * time.Millisecond): // not served yet; proceed either way
	}
	first.c.Close()
	if code := <-got; code != 200 {
		t.Errorf("second connection after the first closed: %d", code)
	}
}

// At the connection cap, idle keep-alive connections give up their slots:
// clients that each make one cheap request and then keep the connection
// open cannot hold a new client (a health check) off for IdleTimeout. A
// request in flight keeps its connection, and Shutdown still waits for it.
func TestFullListenerClosesIdleConnections(t *testing.T) {
	t.Run("http", func(t *testing.T) { testFullListener(t, receiver.ListenOptions{}, dialRaw) })
	t.Run("https", func(t *testing.T) {
		testFullListener(t, receiver.ListenOptions{TLS: selfSigned(t)}, dialTLS)
	})
}

func testFullListener(t *testing.T, opts receiver.ListenOptions, dial func(*testing.T, string) *rawConn) {
	const limit = 8
	e := newEnv(t)
	opts.MaxConnections = limit
	addr, hs := e.serve(opts)
	healthz := func(c *rawConn) error {
		if _, err := io.WriteString(c.c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return err
		}
		resp, err := http.ReadResponse(c.br, nil)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || string(b) != "ok" {
			return fmt.Errorf("%d %q", resp.StatusCode, b)
		}
		return nil
	}

	// In flight: a delivery's head and all but the last 10 body bytes.
	delivery := e.delivery("evt_in_flight", testenv.UsageBody("cus_1", "api", "1"), "length")
	busy := dial(t, addr)
	busy.write(delivery[:len(delivery)-10])
	// The other slots: connections that made one request and stay open.
	idle := make([]*rawConn, limit-1)
	for i := range idle {
		idle[i] = dial(t, addr)
		if err := healthz(idle[i]); err != nil {
			t.Fatalf("idle connection %d: %v", i, err)
		}
	}

	// The listener is full. New clients, more than there are idle
	// connections, are each served: the bound is generous, without the
	// closing they wait the 120 s IdleTimeout.
	for i := range 2 * limit {
		c := dial(t, addr)
		c.c.SetDeadline(time.Now().Add(3 * time.Second))
		if err := healthz(c); err != nil {
			t.Fatalf("new client %d with the listener full: %v", i, err)
		}
	}
	if !idle[0].closedByServer() {
		t.Error("the longest-idle connection is still open")
	}

	shutdown := make(chan error, 1)
	started := make(chan struct{})
	hs.RegisterOnShutdown(func() { close(started) })
	go func() { shutdown <- hs.Shutdown(context.Background()) }()
	<-started
	// The guard is against a hang from here on, not the test's length so
	// far (on a loaded machine the clients above take seconds).
	busy.c.SetDeadline(time.Now().Add(hangGuard))
	busy.write(delivery[len(delivery)-10:])
	if resp, text := busy.response(); resp.StatusCode != 200 {
		t.Errorf("the request in flight: %d %s", resp.StatusCode, text)
	}
	if !e.stored("evt_in_flight") {
		t.Error("the delivery in flight is not stored")
	}
	select {
	case err := <-shutdown:
		if err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("Shutdown did not return")
	}
}

// selfSigned is a TLS configuration with a fresh self-signed certificate.
func selfSigned(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}
