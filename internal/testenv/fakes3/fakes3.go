// Package fakes3 is an in-process S3 for replication tests. It is apart from
// testenv so that only the tests that replicate to S3 depend on gofakes3.
package fakes3

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Serve serves an in-process S3 on loopback; while hang is set every
// request blocks until the client gives up.
func Serve(t testing.TB) (url string, hang *atomic.Bool) {
	backend := gofakes3.New(s3mem.New(), gofakes3.WithAutoBucket(true), gofakes3.WithLogger(gofakes3.DiscardLog()))
	hang, stop := new(atomic.Bool), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if hang.Load() {
			select {
			case <-req.Context().Done():
			case <-stop:
			}
			return
		}
		backend.Server().ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) }) // runs first: release hung handlers
	return srv.URL, hang
}
