package receiver

import (
	"container/list"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/netutil"
)

// ListenOptions shape the webhook listener.
type ListenOptions struct {
	// MaxConnections caps open connections (0: no cap). Connections beyond
	// it wait in the kernel's accept queue, costing serve nothing, until one
	// closes; at the cap, idle keep-alive connections are closed to make
	// room (idleConns). Keep it large: BodyBudget does the real bounding,
	// and a flood of stalled senders must not keep a normal delivery from
	// connecting.
	MaxConnections int
	// TLS, when set, serves HTTPS with it. The listener does the TLS itself,
	// so the framing check sees the decrypted bytes, and offers HTTP/1.1
	// only (ALPN): net/http serves HTTP/2 only on a bare *tls.Conn, and every
	// webhook sender speaks HTTP/1.1.
	TLS *tls.Config
	// HandshakeTimeout bounds a TLS handshake (default 5s).
	HandshakeTimeout time.Duration
}

// Listen opens the webhook listener on addr. Serve it with an http.Server
// from NewHTTPServer, through Serve (never ServeTLS: TLS is done here).
func Listen(addr string, opts ListenOptions) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if opts.MaxConnections > 0 {
		ln = &limitListener{Listener: netutil.LimitListener(ln, opts.MaxConnections), idle: newIdleConns(opts.MaxConnections)}
	}
	fl := &framingListener{Listener: ln}
	if opts.TLS != nil {
		cfg := opts.TLS.Clone()
		cfg.NextProtos = []string{"http/1.1"}
		fl.Listener, fl.tls = tls.NewListener(ln, cfg), true
		fl.timeout = opts.HandshakeTimeout
		if fl.timeout == 0 {
			fl.timeout = 5 * time.Second
		}
	}
	return fl, nil
}

type framingListener struct {
	net.Listener
	tls     bool
	timeout time.Duration
}

func (l *framingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	fc := &framingConn{Conn: c}
	if l.tls {
		return &tlsFramingConn{framingConn: fc, tls: c.(*tls.Conn), timeout: l.timeout}, nil
	}
	return fc, nil
}

// NewHTTPServer is the http.Server for the webhook listener: handler behind
// CheckFraming, with timeouts so that a slow or stalled client cannot pin a
// connection. The body has its own, shorter deadline (Server.BodyTimeout).
// Its ConnState lets a capped Listen close idle connections when full.
func NewHTTPServer(handler http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:     CheckFraming(handler, log),
		ConnContext: ConnContext,
		ConnState:   connState,
		// Every request reaches CheckFraming, so each one takes its own
		// verdict in order; net/http would otherwise answer "OPTIONS *"
		// itself.
		DisableGeneralOptionsHandler: true,
		ReadHeaderTimeout:            5 * time.Second,
		ReadTimeout:                  30 * time.Second,
		WriteTimeout:                 30 * time.Second,
		IdleTimeout:                  120 * time.Second,
		MaxHeaderBytes:               64 << 10,
	}
}

// limitListener is netutil.LimitListener with its connections known to
// idleConns, which closes idle ones when the limit is reached.
type limitListener struct {
	net.Listener
	idle *idleConns
}

func (l *limitListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &limitedConn{Conn: c, idle: l.idle}, nil
}

// limitedConn is a TCP connection holding one of limitListener's slots;
// closing it frees the slot.
type limitedConn struct {
	net.Conn
	idle *idleConns
}

// connState is the http.Server's ConnState: it tells idleConns what each
// connection from a capped Listen is doing. The http.Server sees the
// framing (and TLS) connection; the slot is held by the TCP one under it.
func connState(c net.Conn, s http.ConnState) {
	switch fc := c.(type) {
	case *framingConn:
		c = fc.Conn
	case *tlsFramingConn:
		c = fc.tls.NetConn()
	}
	if lc, ok := c.(*limitedConn); ok {
		lc.idle.track(lc, s)
	}
}

// idleConns keeps a full listener from being held by idle keep-alive
// connections. LimitListener frees a slot only when a connection closes,
// and net/http keeps an idle one open for IdleTimeout (120 s): N clients
// that each send one cheap request and then wait would stall every other
// connection, health checks included, for two minutes. So whenever the
// open connections reach the cap, the longest-idle one is closed at once
// and Accept gets its slot. Net/http closes idle connections the same way
// on IdleTimeout and Shutdown; a sender whose next request crossed the
// close sees the connection fail, as after an IdleTimeout, and sends it
// again (webhook senders retry failed deliveries). A connection busy with a
// request is never closed here.
//
// Neither LimitListener nor net/http exposes which connections are idle, so
// it is tracked here from ConnState. The list keeps the longest-idle
// connection at its front: closing it costs no search under the lock.
// Hijacked connections leave the count (the receiver hijacks none).
type idleConns struct {
	limit int
	mu    sync.Mutex
	open  map[*limitedConn]*list.Element // its element in idle, nil while not idle
	idle  list.List                      // of *limitedConn, longest idle first
}

func newIdleConns(limit int) *idleConns {
	return &idleConns{limit: limit, open: make(map[*limitedConn]*list.Element)}
}

// track records c's new state and keeps the rule that a full listener has
// no idle connection. A call adds at most one open or one idle connection,
// so closing the longest-idle one, if any, restores the rule.
func (t *idleConns) track(c *limitedConn, s http.ConnState) {
	t.mu.Lock()
	e, open := t.open[c]
	if e != nil {
		t.idle.Remove(e)
		t.open[c] = nil
	}
	switch s {
	case http.StateNew:
		t.open[c] = nil
	case http.StateIdle:
		if open { // not closed by track already
			t.open[c] = t.idle.PushBack(c)
		}
	case http.StateClosed, http.StateHijacked:
		delete(t.open, c)
	}
	var victim *limitedConn
	if len(t.open) >= t.limit && t.idle.Len() > 0 {
		victim = t.idle.Remove(t.idle.Front()).(*limitedConn)
		delete(t.open, victim)
	}
	t.mu.Unlock()
	// The TCP connection, not the TLS one over it: tls.Conn.Close first
	// sends close_notify, which can wait 5 s on a peer that does not read,
	// and StateNew is reported from Serve's accept loop. The victim's own
	// goroutine, waiting for its next request, then fails and reports
	// StateClosed.
	if victim != nil {
		victim.Close()
	}
}
