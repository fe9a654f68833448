package receiver

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The scan follows request heads through pipelined Content-Length bodies and
// finds a conflicting head wherever it is, in however many reads it comes.
func TestFramingScan(t *testing.T) {
	const smuggled = "\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n"
	req := func(headers string, body string) string {
		return "POST /webhooks/default HTTP/1.1\r\nHost: x\r\n" + headers + "\r\n" + body
	}
	for _, c := range []struct {
		name   string
		stream string
		want   []framing
	}{
		{"no body", "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", []framing{framingOK}},
		{"content-length", req("Content-Length: 5\r\n", "hello"), []framing{framingOK}},
		{"both", req("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n"), []framing{framingConflict}},
		{"both, other order and case", req("transfer-encoding: chunked\r\nCONTENT-LENGTH: 5\r\n", "0\r\n\r\n"), []framing{framingConflict}},
		{"both, bare LF line ends", "POST / HTTP/1.1\nHost: x\nContent-Length: 5\nTransfer-Encoding: chunked\n\n0\n\n", []framing{framingConflict}},
		{"both, Transfer-Encoding not chunked", req("Content-Length: 5\r\nTransfer-Encoding: gzip\r\n", "hello"), []framing{framingConflict}},
		{"chunked alone ends the scan", req("Transfer-Encoding: chunked\r\n", "5\r\nhello\r\n0\r\n\r\n") + req("Content-Length: 1\r\nTransfer-Encoding: chunked\r\n", ""),
			[]framing{framingClose}},
		{"pipelined, second conflicts", req("Content-Length: 11\r\n", "Content-Len") + req("Content-Length: 2\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n"),
			[]framing{framingOK, framingConflict}},
		{"body bytes that look like headers are skipped", req(fmt.Sprintf("Content-Length: %d\r\n", len(smuggled)), smuggled) + req("", ""),
			[]framing{framingOK, framingOK}},
		{"header values that name the other header do not count", req("X-Note: Transfer-Encoding: chunked\r\nContent-Length: 0\r\n", ""), []framing{framingOK}},
		{"a folded line is not a header of its own", req("X-A: a\r\n Transfer-Encoding: chunked\r\nContent-Length: 0\r\n", ""), []framing{framingOK}},
		{"equal duplicate content-lengths", req("Content-Length: 2\r\nContent-Length: 2\r\n", "ok") + req("", ""), []framing{framingOK, framingOK}},
		{"differing content-lengths end the scan", req("Content-Length: 2\r\nContent-Length: 3\r\n", "ok"), []framing{framingClose}},
		{"unparsable content-length ends the scan", req("Content-Length: +2\r\n", "ok"), []framing{framingClose}},
		{"over-long content-length line ends the scan", req("Content-Length:"+strings.Repeat(" ", 80)+"2\r\n", "ok"), []framing{framingClose}},
		{"long other lines are fine", req("X-Long: "+strings.Repeat("a", 10000)+"\r\nContent-Length: 2\r\n", "ok") + req("", ""), []framing{framingOK, framingOK}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Whole, then one byte per read: net/http reads in arbitrary pieces.
			for _, step := range []int{len(c.stream), 1, 7} {
				var s framingScan
				for b := []byte(c.stream); len(b) > 0; {
					n := min(step, len(b))
					s.feed(b[:n])
					b = b[n:]
				}
				if !slices.Equal(s.verdicts, c.want) {
					t.Errorf("reads of %d bytes: verdicts %v, want %v", step, s.verdicts, c.want)
				}
			}
		})
	}
}

// Handlers take verdicts in request order; a request whose head the scan
// never reached (it stopped before) closes its connection.
func TestFramingScanNext(t *testing.T) {
	var s framingScan
	s.feed([]byte("GET / HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\nGET / HTTP/1.1\r\n\r\n"))
	for i, want := range []framing{framingOK, framingConflict, framingClose, framingClose} {
		if got := s.next(); got != want {
			t.Errorf("request %d: %v, want %v", i+1, got, want)
		}
	}
}

// A pipelining client cannot grow the verdict queue without bound.
func TestFramingScanBoundsPending(t *testing.T) {
	var s framingScan
	s.feed([]byte(strings.Repeat("GET / HTTP/1.1\r\n\r\n", 1000)))
	if len(s.verdicts) != maxPending+1 || s.verdicts[maxPending] != framingClose || !s.stopped {
		t.Errorf("%d verdicts (last %v), stopped %v; want %d, the last framingClose", len(s.verdicts), s.verdicts[len(s.verdicts)-1], s.stopped, maxPending+1)
	}
}
