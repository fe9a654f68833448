package admin

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/schema"
)

// The API's preview is a read: it answers while a close holds the write
// lock (on PostgreSQL, the chain head a close locks), instead of waiting
// for it.
func TestPreviewAPITakesNoWriteLock(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e, _, url := customersEnv(t, backend)
		if r := e.Send("evt_1", testenv.UsageBody("cus_1", "api_requests", "1500")); r.Code != 200 {
			t.Fatalf("send: %+v", r)
		}
		held, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			done <- e.DB.CloseTx(context.Background(), func(*schema.CloseTx) error {
				close(held)
				<-release
				return schema.ErrRollback
			})
		}()
		<-held
		defer func() {
			close(release)
			if err := <-done; err != nil {
				t.Error(err)
			}
		}()
		req, _ := http.NewRequest("GET", url+"/v1/customers/cus_1/invoice/preview", nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("the preview while a close holds the write lock: %v", err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"total": "42.00"`) {
			t.Errorf("the preview while a close holds the write lock: %d %s", resp.StatusCode, body)
		}
	})
}
