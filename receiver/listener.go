package receiver

import (
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
)

// ListenOptions shape the webhook listener.
type ListenOptions struct {
	// MaxConnections caps open connections (0: no cap). Connections beyond
	// it wait in the kernel's accept queue, costing serve nothing, until one
	// closes. Keep it large: BodyBudget does the real bounding, and a flood
	// of stalled senders must not keep a normal delivery from connecting.
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
		ln = netutil.LimitListener(ln, opts.MaxConnections)
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
func NewHTTPServer(handler http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:     CheckFraming(handler, log),
		ConnContext: ConnContext,
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
