package receiver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
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
//   - bodies over smallBody draw their size from a BodyBudget before any of
//     it is read: 2,000 stalled senders then hold at most the budget, while
//     their unread bytes wait in the kernel's socket buffers, not our heap;
//   - the whole body, budget wait included, must arrive within the body
//     timeout (http.ResponseController.SetReadDeadline), shorter than the
//     server's generic read timeout.
//
// Bodies up to smallBody skip the budget: a stalled flood that fills the
// budget must not make a normal delivery (a few KiB) wait, and what small
// bodies can hold is already bounded by the connection limit
// (max_connections × smallBody).
const smallBody = 16 << 10

// budgetWait is how long a request waits for room in the budget before it
// gets 503 with Retry-After. Real bodies arrive in milliseconds, so a burst
// of them gets through a short wait; stalled senders hold their share until
// the body deadline, so a longer wait would only let the senders queued
// behind them hold connection slots (max_connections) and goroutines that
// long too, while a normal delivery may be waiting to connect.
const budgetWait = time.Second

// BodyBudget bounds the body bytes requests hold at once. Its semaphore is
// FIFO: a large body waiting for room is not starved by smaller ones.
type BodyBudget struct {
	sem *semaphore.Weighted
}

// NewBodyBudget returns a budget of size bytes.
func NewBodyBudget(size int64) *BodyBudget {
	return &BodyBudget{sem: semaphore.NewWeighted(size)}
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
	size := r.ContentLength // -1 when chunked: assume the worst, limit
	if size > limit {
		return nil, release, errBodyTooLarge
	}
	if size < 0 {
		size = limit
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
	if weight := size; s.Budget != nil && weight > smallBody {
		wait, cancel := context.WithTimeout(ctx, budgetWait)
		err := s.Budget.sem.Acquire(wait, weight)
		cancel()
		if err != nil {
			return nil, release, errBodyBudget
		}
		release = func() { s.Budget.sem.Release(weight) }
		// Room came too late to read anything: do not allocate a buffer
		// only to time out on it.
		if ctx.Err() != nil {
			return nil, release, errBodyBudget
		}
	}
	body, err = readAtMost(http.MaxBytesReader(w, r.Body, limit), r.ContentLength, limit)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = errBodyTimeout
	}
	return body, release, err
}

// readAtMost reads a body of declared length n (-1: unknown) into a buffer
// that never grows past what the budget accounted for: exactly n bytes when
// declared, at most limit+1 when not (io.ReadAll's doubling could overshoot
// it by up to a quarter).
func readAtMost(r io.Reader, n, limit int64) ([]byte, error) {
	if n >= 0 {
		buf := make([]byte, n)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return buf, nil
	}
	buf := make([]byte, 0, min(limit+1, 4<<10))
	for {
		if len(buf) == cap(buf) {
			next := make([]byte, len(buf), min(2*int64(cap(buf)), limit+1))
			copy(next, buf)
			buf = next
		}
		m, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
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
