package receiver

import (
	"bytes"
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// A request with both Content-Length and Transfer-Encoding is how request
// smuggling starts: a proxy in front may frame it by one header while we
// frame it by the other. RFC 9112 §6.3 lets a server reject it, and requires
// it to close the connection either way. net/http (Go 1.26) frames it by
// Transfer-Encoding, deletes Content-Length from Request.Header before any
// handler runs, and keeps the connection open: by the time a handler sees the
// request, nothing says both were there. So the raw bytes are read where they
// still are, on the connection: framingConn scans each request head as
// net/http reads it, and CheckFraming, the outermost handler, acts on what
// the scan found for the request it is given.
//
// The scanner follows a connection from one request to the next only where
// that is simple and certain: a head, then exactly Content-Length body bytes.
// A chunked body (or anything it cannot follow, such as a Content-Length it
// cannot parse) ends the scan, and that request's response closes the
// connection, so no later request on it goes unchecked. Webhook senders send
// Content-Length; a chunked one pays a new connection per delivery.

// framing is what the scan says about one request.
type framing int

const (
	framingOK       framing = iota // Content-Length or no body: the next request is followed too
	framingClose                   // the scan stops here: close the connection after the response
	framingConflict                // Content-Length and Transfer-Encoding: 400, then close
)

const (
	// scanLine is how much of a header line the scan keeps: enough for the
	// name and a Content-Length value; a longer Content-Length line is
	// framing the scan does not follow.
	scanLine = 64
	// maxPending bounds the verdicts of pipelined requests not yet handled.
	maxPending = 32
)

// framingScan is the state of one connection's scan.
type framingScan struct {
	stopped  bool
	skip     int64  // body bytes left before the next request head
	line     []byte // the current line's first scanLine bytes
	lineLen  int    // and its whole length so far
	started  bool   // the request line of the current head has been seen
	cl, te   bool   // the current head has Content-Length / Transfer-Encoding
	clOK     bool   // and its Content-Length values parse and agree
	length   int64
	verdicts []framing // one per complete head, oldest first
}

func (s *framingScan) feed(b []byte) {
	for len(b) > 0 && !s.stopped {
		if s.skip > 0 {
			n := min(int64(len(b)), s.skip)
			s.skip -= n
			b = b[n:]
			continue
		}
		i := bytes.IndexByte(b, '\n')
		part := b
		if i >= 0 {
			part = b[:i]
		}
		if room := scanLine - len(s.line); room > 0 {
			s.line = append(s.line, part[:min(room, len(part))]...)
		}
		s.lineLen += len(part)
		if i < 0 {
			return
		}
		b = b[i+1:]
		s.endLine()
	}
}

// endLine handles one complete line of a request head.
func (s *framingScan) endLine() {
	long := s.lineLen > len(s.line) // part of it was not kept
	line := bytes.TrimSuffix(s.line, []byte("\r"))
	s.line, s.lineLen = s.line[:0], 0
	switch {
	case !s.started:
		// The request line; net/http rejects a blank one.
		s.started = true
		return
	case len(line) == 0 && !long:
		s.endHead()
		return
	case line[0] == ' ' || line[0] == '\t':
		return // a continuation (obs-fold) belongs to the header before it
	}
	name, value, ok := bytes.Cut(line, []byte(":"))
	if !ok {
		return // net/http rejects the request
	}
	switch {
	case bytes.EqualFold(name, []byte("Transfer-Encoding")):
		s.te = true
	case bytes.EqualFold(name, []byte("Content-Length")):
		n, ok := parseLength(bytes.Trim(value, " \t"))
		if long || !ok || (s.cl && n != s.length) {
			s.clOK = false
		} else if !s.cl {
			s.clOK = true
		}
		s.cl, s.length = true, n
	}
}

func (s *framingScan) endHead() {
	v := framingOK
	switch {
	case s.cl && s.te:
		v = framingConflict
	case s.te, s.cl && !s.clOK, len(s.verdicts) >= maxPending:
		v = framingClose
	}
	s.verdicts = append(s.verdicts, v)
	if v != framingOK {
		s.stopped = true
	} else if s.cl {
		s.skip = s.length
	}
	s.started, s.cl, s.te, s.clOK, s.length = false, false, false, false, 0
}

// next is the verdict for the oldest request not yet handled. With none (the
// scan stopped before this request's head) the connection closes after it.
func (s *framingScan) next() framing {
	if len(s.verdicts) == 0 {
		return framingClose
	}
	v := s.verdicts[0]
	s.verdicts = s.verdicts[1:]
	return v
}

// parseLength parses a Content-Length value as net/http does: decimal
// digits only, no sign, fits in an int64.
func parseLength(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// framingConn scans the bytes net/http reads from the connection. net/http
// reads from one goroutine per request, plus a background reader between
// requests, hence the mutex.
type framingConn struct {
	net.Conn
	mu   sync.Mutex
	scan framingScan
}

func (c *framingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		c.scan.feed(p[:n])
		c.mu.Unlock()
	}
	return n, err
}

func (c *framingConn) next() framing {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.scan.next()
}

// tlsFramingConn is a framingConn over TLS. net/http only treats a *tls.Conn
// as TLS; for any other connection it asks ConnectionState, once, before it
// reads the first request, so the handshake is completed here, bounded the
// way net/http bounds its own.
type tlsFramingConn struct {
	*framingConn
	tls     *tls.Conn
	timeout time.Duration
}

func (c *tlsFramingConn) ConnectionState() tls.ConnectionState {
	if c.timeout > 0 {
		c.tls.SetDeadline(time.Now().Add(c.timeout))
		defer c.tls.SetDeadline(time.Time{})
	}
	if err := c.tls.Handshake(); err != nil {
		// Like net/http: plain HTTP sent to the TLS port gets a plain
		// answer. Any other failure: the first read returns the error and
		// the connection closes.
		if re, ok := err.(tls.RecordHeaderError); ok && re.Conn != nil && looksLikeHTTP(re.RecordHeader) {
			re.Conn.Write([]byte("HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"))
			re.Conn.Close()
		}
	}
	return c.tls.ConnectionState()
}

func looksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO":
		return true
	}
	return false
}

type framingConnKey struct{}

// ConnContext is the http.Server's ConnContext: it lets CheckFraming find
// the connection a request came on.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	switch fc := c.(type) {
	case *framingConn:
		return context.WithValue(ctx, framingConnKey{}, fc)
	case *tlsFramingConn:
		return context.WithValue(ctx, framingConnKey{}, fc.framingConn)
	}
	return ctx
}

// CheckFraming answers a request that carried both Content-Length and
// Transfer-Encoding with 400 and closes its connection, before next sees it;
// after a request the scan cannot see past, it closes the connection once
// next has answered. Requests on connections Listen did not make pass as
// they are.
func CheckFraming(next http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := r.Context().Value(framingConnKey{}).(*framingConn)
		if c == nil || r.ProtoMajor != 1 {
			next.ServeHTTP(w, r)
			return
		}
		switch c.next() {
		case framingConflict:
			log.LogAttrs(r.Context(), slog.LevelInfo, "request refused", slog.String("remote_addr", r.RemoteAddr),
				slog.String("path", r.URL.Path), slog.String("reason", "content_length_and_transfer_encoding"), slog.Int("status", http.StatusBadRequest))
			w.Header().Set("Connection", "close")
			writeJSON(w, http.StatusBadRequest, reply{Error: "request carries both Content-Length and Transfer-Encoding (RFC 9112 section 6.3)"})
			return
		case framingClose:
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}
