package receiver

import (
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// refusalEvery is how often one source's refusals are logged at warn: the
// first at once, then at most one line an interval, carrying how many were
// left out since. A sender that signs with the wrong secret, or floods the
// endpoint, writes a line every ten seconds, not one per request; the
// minute's summary (serve) counts every refusal by reason.
const refusalEvery = 10 * time.Second

// refusalLog remembers, per source (provider and remote host), when its
// last refusal was logged and how many were left out since. The zero value
// is ready.
type refusalLog struct {
	mu sync.Mutex
	by map[string]*refusalState
}

type refusalState struct {
	last       time.Time
	suppressed int
}

// maxRefusalSources bounds the sources remembered: past it, those quiet
// for an interval are forgotten.
const maxRefusalSources = 10000

// allow reports whether a refusal from key is logged now, and how many of
// its refusals were left out before it.
func (l *refusalLog) allow(key string, now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.by == nil {
		l.by = map[string]*refusalState{}
	}
	st := l.by[key]
	if st == nil {
		if len(l.by) >= maxRefusalSources {
			for k, v := range l.by {
				if now.Sub(v.last) >= refusalEvery {
					delete(l.by, k)
				}
			}
		}
		st = &refusalState{}
		l.by[key] = st
	}
	if !st.last.IsZero() && now.Sub(st.last) < refusalEvery {
		st.suppressed++
		return false, 0
	}
	suppressed, st.suppressed, st.last = st.suppressed, 0, now
	return true, suppressed
}

// refused logs a refused request, or one whose event was kept failed (its
// mapping did not apply), at warn as msg, a few a source (refusalEvery).
func (s *Server) refused(r *http.Request, provider, msg string, attrs []slog.Attr) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ok, suppressed := s.refusals.allow(provider+" "+host, time.Now())
	if !ok {
		return
	}
	attrs = append(attrs, slog.String("source", host))
	if suppressed > 0 {
		attrs = append(attrs, slog.Int("suppressed", suppressed))
	}
	s.Log.LogAttrs(r.Context(), slog.LevelWarn, msg, attrs...)
}
