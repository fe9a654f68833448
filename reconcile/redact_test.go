package reconcile

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// An API (or a proxy in front of it) that answers with the request quoted
// back: the token is in no error, whether the answer is a refusal or a 200
// that is not a list, and however the quote is cut.
func TestEchoedTokenIsNotInErrors(t *testing.T) {
	const token = "ghp_ReconcileTokenThatMustNeverShow0123"
	w := Window{From: testNow.Add(-time.Hour), To: testNow}
	for _, code := range []int{401, 200} {
		for _, pad := range []int{0, 300 - 40} { // 260: the token straddles the 300 bytes quoted
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				h, _ := json.Marshal(r.Header)
				w.WriteHeader(code)
				w.Write([]byte(strings.Repeat("x", pad) + "Authorization: " + r.Header.Get("Authorization") + " " + string(h)))
			}))
			for name, s := range map[string]Source{"stripe": NewStripeSource(srv.URL, token), "github": NewGitHubSource(srv.URL, token, "a/b", "", 1)} {
				_, err := s.List(context.Background(), w, "")
				if err == nil {
					t.Fatalf("%s %d: no error", name, code)
				}
				for _, part := range []string{token[4:16], token[16:28], token[len(token)-12:]} {
					if strings.Contains(err.Error(), part) {
						t.Errorf("%s %d pad %d: the token shows: %v", name, code, pad, err)
					}
				}
			}
			srv.Close()
		}
	}
}
