package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"
)

// Stall opens stalled senders against a receiver: unauthenticated
// connections that each declare a Declare-byte body to POST Path, send Send
// bytes of it and then send nothing more, as a slow-loris flood does. It
// measures what such senders cost the receiver (bench/cmd/slowsenders, and
// the RSS test in the repository root).
type Stall struct {
	Addr    string // host:port
	Path    string // default /webhooks/default
	Conns   int
	Send    int64
	Declare int64
	Dialers int // connections opened at once; default 64
}

// Stalled is a set of open stalled connections.
type Stalled struct {
	mu       sync.Mutex
	conns    []net.Conn
	outcomes map[string]int
	wg       sync.WaitGroup
}

// Open dials every connection and starts its writes; the bytes a receiver
// does not read wait in the socket buffers, as a real sender's would. It
// returns once every connection is open.
func (s Stall) Open(ctx context.Context) (*Stalled, error) {
	if s.Send > s.Declare {
		return nil, fmt.Errorf("send %d of a declared %d: a stalled sender never completes its body", s.Send, s.Declare)
	}
	path, dialers := s.Path, s.Dialers
	if path == "" {
		path = "/webhooks/default"
	}
	if dialers <= 0 {
		dialers = 64
	}
	head := []byte(fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, s.Addr, s.Declare))
	body := bytes.Repeat([]byte("a"), int(s.Send))
	st := &Stalled{outcomes: map[string]int{}}
	sem := make(chan struct{}, dialers)
	var dialErr error
	var dialing sync.WaitGroup
	for range s.Conns {
		sem <- struct{}{}
		dialing.Add(1)
		go func() {
			defer dialing.Done()
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", s.Addr)
			<-sem
			st.mu.Lock()
			defer st.mu.Unlock()
			if err != nil {
				dialErr = err
				return
			}
			st.conns = append(st.conns, c)
			st.wg.Add(2)
			go func() {
				defer st.wg.Done()
				c.Write(head)
				c.Write(body)
			}()
			go func() {
				defer st.wg.Done()
				st.record(c)
			}()
		}()
	}
	dialing.Wait()
	if dialErr != nil {
		st.Close()
		return nil, fmt.Errorf("dial %s: %w (is the file-descriptor limit above %d?)", s.Addr, dialErr, s.Conns)
	}
	return st, nil
}

// record notes what the receiver answered the connection, or that it hung up.
func (st *Stalled) record(c net.Conn) {
	line, err := bufio.NewReader(c).ReadString('\n')
	k := "closed without a response"
	if err == nil {
		k = "answered " + strings.TrimSpace(strings.TrimPrefix(line, "HTTP/1.1 "))
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		k = "still open"
	}
	st.mu.Lock()
	st.outcomes[k]++
	st.mu.Unlock()
}

// Len is the number of open stalled connections.
func (st *Stalled) Len() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.conns)
}

// Close ends every connection and returns how each ended: the status line
// the receiver answered, "closed without a response", or "still open".
func (st *Stalled) Close() map[string]int {
	st.mu.Lock()
	conns := st.conns
	st.mu.Unlock()
	for _, c := range conns {
		c.SetDeadline(time.Now()) // unanswered ones now report "still open"
	}
	st.wg.Wait()
	for _, c := range conns {
		c.Close()
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.outcomes
}
