package cli

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hookledger/hookledger/ingest"
)

// receiverStub records the paths posted to it and accepts everything.
type receiverStub struct {
	*httptest.Server
	mu    sync.Mutex
	paths []string
}

func newReceiverStub(t *testing.T) *receiverStub {
	s := &receiverStub{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.paths = append(s.paths, r.Method+" "+r.URL.Path)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/events" {
			fmt.Fprintln(w, `{"events":[{"index":0,"id":"e","status":"applied"}]}`)
			return
		}
		fmt.Fprintln(w, `{"accepted":true,"duplicate":false}`)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *receiverStub) posted() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.paths...)
}

// Without --url, send and ingest post where the config's listen serves; a
// URL given by flag or HOOKLEDGER_URL wins; nothing answering says where the
// URL came from.
func TestClientsPostWhereTheConfigListens(t *testing.T) {
	t.Setenv("HOOKLEDGER_URL", "")
	os.Unsetenv("HOOKLEDGER_URL")
	dir := t.TempDir()
	config := func(listen string) string {
		path := filepath.Join(dir, "hookledger.yml")
		yml := fmt.Sprintf("listen: %s\ndata: %s\nproviders:\n  - name: default\n    scheme: standard\n"+
			"    secrets: [\"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"]\n", listen, filepath.Join(dir, "data"))
		if err := os.WriteFile(path, []byte(yml), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	key, _, _, err := ingest.NewKey()
	if err != nil {
		t.Fatal(err)
	}

	srv := newReceiverStub(t)
	cfg := config(strings.TrimPrefix(srv.URL, "http://"))
	if code, out, stderr := exit("send", "--config", cfg, "--id", "evt_1"); code != 0 {
		t.Fatalf("send: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr := exit("send", "--config", cfg, "--api", "--key", key, "--id", "evt_2"); code != 0 {
		t.Fatalf("send --api: exit %d\n%s%s", code, out, stderr)
	}
	if got := srv.posted(); len(got) != 2 || got[0] != "POST /webhooks/default" || got[1] != "POST /v1/events" {
		t.Errorf("posted %v, want the webhook and the ingest API of the config's listener", got)
	}

	other := newReceiverStub(t)
	t.Setenv("HOOKLEDGER_URL", other.URL)
	if code, out, stderr := exit("send", "--config", cfg, "--id", "evt_3"); code != 0 {
		t.Fatalf("send with HOOKLEDGER_URL: exit %d\n%s%s", code, out, stderr)
	}
	if got := other.posted(); len(got) != 1 || len(srv.posted()) != 2 {
		t.Errorf("with HOOKLEDGER_URL: posted %v there and %v to the config's listener", got, srv.posted())
	}
	os.Unsetenv("HOOKLEDGER_URL")

	// HOOKLEDGER_LISTEN steers serve, so the clients follow it too.
	third := newReceiverStub(t)
	t.Setenv("HOOKLEDGER_LISTEN", strings.TrimPrefix(third.URL, "http://"))
	if code, out, stderr := exit("send", "--config", cfg, "--id", "evt_5"); code != 0 {
		t.Fatalf("send with HOOKLEDGER_LISTEN: exit %d\n%s%s", code, out, stderr)
	}
	if got := third.posted(); len(got) != 1 || len(srv.posted()) != 2 {
		t.Errorf("with HOOKLEDGER_LISTEN: posted %v there and %v to the config's listener", got, srv.posted())
	}
	os.Unsetenv("HOOKLEDGER_LISTEN")

	// Nothing listens where the config says.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	cfg = config(closed)
	code, _, stderr := exit("send", "--config", cfg, "--id", "evt_4")
	if want := "POST http://" + closed + "/webhooks/default: "; code != 1 || !strings.Contains(stderr, want) ||
		!strings.Contains(stderr, "is hookledger serve running there? (the URL is --url or HOOKLEDGER_URL, else HOOKLEDGER_LISTEN, else the config's listen)") {
		t.Errorf("send to a closed port: exit %d\n%s", code, stderr)
	}
}

func TestListenURL(t *testing.T) {
	for listen, want := range map[string]string{
		":8080":          "http://localhost:8080",
		"0.0.0.0:9000":   "http://localhost:9000",
		"[::]:9000":      "http://localhost:9000",
		"127.0.0.1:8081": "http://127.0.0.1:8081",
		"[::1]:8081":     "http://[::1]:8081",
		"hooks.internal": "http://hooks.internal",
	} {
		if got := listenURL(listen); got != want {
			t.Errorf("listenURL(%q) = %q, want %q", listen, got, want)
		}
	}
}

// A signature serve refuses (401) is answered with where send's secret came
// from, so a stale HOOKLEDGER_SECRET is found at once.
func TestSendSaysWhereARefusedSecretCameFrom(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintln(w, `{"error":"no signature matches a configured secret"}`)
	}))
	defer srv.Close()
	t.Chdir(t.TempDir()) // no ./hookledger.yml: the embedded default provider
	t.Setenv("HOOKLEDGER_SECRET", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	code, out, stderr := exit("send", "--url", srv.URL, "--id", "evt_1")
	if code != 1 || !strings.Contains(out, "401") ||
		!strings.Contains(stderr, "send signed with the secret from HOOKLEDGER_SECRET; serve holds another") {
		t.Errorf("exit %d\nstdout %s\nstderr %s", code, out, stderr)
	}
	// A --secret is the sender's own choice: nothing to point at.
	code, _, stderr = exit("send", "--url", srv.URL, "--id", "evt_1", "--secret", "whsec_c2VjcmV0LW5vdC10aGUtcmlnaHQtb25lISEh")
	if code != 1 || strings.Contains(stderr, "signed with the secret from") {
		t.Errorf("with --secret: exit %d\nstderr %s", code, stderr)
	}
}
