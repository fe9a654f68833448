package receiver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// Reading a body is where an unauthenticated sender can make serve hold
// memory: today's request has not been verified yet, so its bytes cost
// whatever the sender wants them to cost. Three bounds apply before the
// signature is checked:
//
//   - a declared Content-Length above the provider's max_body is refused at
//     once (413), without reading a byte;
//   - a body's buffer grows only as its bytes arrive, and every byte of
//     buffer past the body's first smallBody is drawn from a BodyBudget
//     before it is allocated. A sender is charged for what it sent, not for
//     what it announced: 1,000 senders that each announce max_body and send
//     one byte hold a small buffer each and none of the budget, so they do
//     not keep a large signed delivery out. To hold the budget, a flood
//     must send at least half as many bytes as the budget has (a buffer
//     holds at most about twice what arrived), again every body timeout;
//   - the whole body, budget waits included, must arrive within the body
//     timeout (http.ResponseController.SetReadDeadline), shorter than the
//     server's generic read timeout.
//
// The first smallBody of each body is free: a stalled flood that fills the
// budget must not make a normal delivery (a few KiB) wait, and what those
// first bytes can hold is already bounded by the connection limit
// (max_connections × smallBody).
const smallBody = 16 << 10

// firstBuffer is the buffer a body larger than smallBody starts with; it
// doubles as the body arrives (capped at the declared length), so a body
// holds at most about twice what it has sent.
const firstBuffer = 4 << 10

// budgetWait is how long a body waits for room in the budget, at each
// growth of its buffer, before it gets 503 with Retry-After. Real bodies
// arrive in milliseconds, so a burst of them gets through a short wait;
// senders that stall hold their share until the body deadline, so a longer
// wait would only let the senders queued behind them hold connection slots
// (max_connections) and goroutines that long too, while a normal delivery
// may be waiting to connect.
const budgetWait = time.Second

// BodyBudget bounds the body bytes requests hold at once beyond each one's
// first smallBody. Its semaphore is FIFO: a large body waiting for room is
// not starved by smaller ones.
type BodyBudget struct {
	sem *semaphore.Weighted
	// held is the budget's bytes that bodies hold, and reading the requests
	// reading a body under it (tests watch them).
	held, reading atomic.Int64
}

// NewBodyBudget returns a budget of size bytes.
func NewBodyBudget(size int64) *BodyBudget {
	return &BodyBudget{sem: semaphore.NewWeighted(size)}
}

// charge makes the budget that a body's buffer of capacity bytes needs
// match what it holds (*held), waiting up to budgetWait for room.
func (b *BodyBudget) charge(ctx context.Context, held *int64, capacity int64) error {
	need := max(0, capacity-smallBody) - *held
	if need <= 0 {
		return nil
	}
	wait, cancel := context.WithTimeout(ctx, budgetWait)
	defer cancel()
	if err := b.sem.Acquire(wait, need); err != nil {
		return errBodyBudget
	}
	*held += need
	b.held.Add(need)
	return nil
}

// release gives back what a body holds.
func (b *BodyBudget) release(held int64) {
	b.sem.Release(held)
	b.held.Add(-held)
}

// Body read failures, mapped to replies by bodyError.
var (
	errBodyTooLarge = errors.New("body too large")
	errBodyBudget   = errors.New("in-flight body budget exhausted")
	errBodyTimeout  = errors.New("body not received in time")
)

// readBody reads r's body, at most limit bytes, under the budget and the
// body timeout. release gives the budget back; call it once the body is no
// longer needed (after the reply), also when err is not nil.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, limit int64) (body []byte, release func(), err error) {
	release = func() {}
	if r.ContentLength > limit {
		return nil, release, errBodyTooLarge
	}
	ctx := r.Context()
	if s.BodyTimeout > 0 {
		deadline := time.Now().Add(s.BodyTimeout)
		// Not supported by every ResponseWriter (httptest.ResponseRecorder);
		// a real server connection always supports it.
		if err := http.NewResponseController(w).SetReadDeadline(deadline); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return nil, release, err
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	grow := func(int64) error { return nil }
	if b := s.Budget; b != nil {
		b.reading.Add(1)
		defer b.reading.Add(-1)
		var held int64
		grow = func(capacity int64) error { return b.charge(ctx, &held, capacity) }
		release = func() { b.release(held) }
	}
	body, err = readArriving(http.MaxBytesReader(w, r.Body, limit), r.ContentLength, limit, grow)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = errBodyTimeout
	}
	return body, release, err
}

// readArriving reads a body of declared length n (-1: unknown, then at most
// limit) into a buffer that grows only once the bytes to fill it arrive: a
// sender that announces a large body and sends a byte of it holds a small
// buffer, not the announced size. grow is told each new capacity before it
// is allocated, and its error ends the read. The buffer never grows past n
// (limit when n is unknown), and a declared body of at most smallBody is
// read into one exact buffer.
func readArriving(r io.Reader, n, limit int64, grow func(capacity int64) error) ([]byte, error) {
	most := n
	if n < 0 {
		most = limit
	}
	var buf []byte
	for {
		var m int
		var err error
		if len(buf) < cap(buf) {
			m, err = r.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+m]
		} else {
			// Full: wait for the next byte before growing, so that the
			// buffer, and the budget's charge, follow what has arrived.
			var next [1]byte
			if m, err = r.Read(next[:]); m == 1 {
				if int64(len(buf)) >= most {
					return nil, errBodyTooLarge // past the declared length: net/http never reads that far
				}
				size := min(max(2*int64(cap(buf)), firstBuffer), most)
				if most <= smallBody {
					size = most
				}
				if err := grow(size); err != nil {
					return nil, err
				}
				buf = append(append(make([]byte, 0, size), buf...), next[0])
			}
		}
		if errors.Is(err, io.EOF) {
			return buf, nil
		} else if err != nil {
			return nil, err
		}
	}
}

// bodyError is the reply to a body that could not be read. Every one of them
// closes the connection: its remaining bytes are unread, and a sender that
// stalled or overflowed should not keep a connection slot.
func (s *Server) bodyError(err error, limit int64) (code int, reason, msg string) {
	var tooBig *http.MaxBytesError
	switch {
	case errors.Is(err, errBodyTooLarge), errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("body exceeds %d bytes", limit)
	case errors.Is(err, errBodyBudget):
		return http.StatusServiceUnavailable, "body_budget", "too many bodies in flight, retry later"
	case errors.Is(err, errBodyTimeout):
		return http.StatusRequestTimeout, "body_timeout", fmt.Sprintf("body not received within %s", s.BodyTimeout)
	default:
		return http.StatusBadRequest, "read_error", "could not read body"
	}
}
