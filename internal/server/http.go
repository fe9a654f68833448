package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// ServeHTTP serves each server on its listener until ctx ends or one fails,
// then shuts them all down (bounded by timeout): for a process that has
// nothing else to close, like the bench reference server.
func ServeHTTP(ctx context.Context, log *slog.Logger, servers []*http.Server, listeners []net.Listener, timeout time.Duration) error {
	err := serveHTTP(ctx, servers, listeners)
	if serr := shutdownHTTP(log, servers, timeout); err == nil {
		err = serr
	}
	return err
}

// serveHTTP serves servers[i] on listeners[i] until ctx ends or one fails,
// and returns that failure.
func serveHTTP(ctx context.Context, servers []*http.Server, listeners []net.Listener) error {
	errc := make(chan error, len(servers))
	for i, hs := range servers {
		go func() {
			if hs.TLSConfig != nil {
				errc <- hs.ServeTLS(listeners[i], "", "") // the certificate comes from TLSConfig
				return
			}
			errc <- hs.Serve(listeners[i])
		}()
	}
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// shutdownHTTP stops accepting and waits, at most timeout, for in-flight
// handlers. Each handler waits for its batch to commit, so once it returns
// every acknowledged event is durable.
func shutdownHTTP(log *slog.Logger, servers []*http.Server, timeout time.Duration) error {
	log.Info("shutting down")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var err error
	for _, hs := range servers {
		if serr := hs.Shutdown(ctx); serr != nil && err == nil {
			err = fmt.Errorf("shutdown: %w", serr)
		}
	}
	return err
}
