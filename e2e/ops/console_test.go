package ops_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/hookledger/hookledger/internal/testenv"
)

// serve tells the console why it does not replicate, in the words it logs:
// the overview's replication card names the reason (issue 24), here for a
// directory without litestream.yml and for --no-replication. (The
// PostgreSQL reason takes the same path: console.TestReplicationOffReason.)
func TestConsoleSaysWhyNotReplicating(t *testing.T) {
	bin := testenv.Binary(t)
	for _, c := range []struct {
		args   []string
		reason string
	}{
		{nil, "no ./litestream.yml and no --litestream-config"},
		{[]string{"--no-replication"}, "--no-replication"},
	} {
		dir := t.TempDir()
		cfg := opsConfig(t, dir, "admin:\n  listen: 127.0.0.1:0\n")
		s := opsStart(t, bin, dir, []string{"HOOKLEDGER_ADMIN_TOKEN=" + opsAdminToken}, append([]string{"--config", cfg}, c.args...)...)
		if s.admin == "" {
			t.Fatalf("admin listener not started:\n%s", s.logs)
		}
		jar, _ := cookiejar.New(nil)
		client := &http.Client{Jar: jar}
		req, _ := http.NewRequest("POST", s.admin+"/ui/signin", strings.NewReader(url.Values{"token": {opsAdminToken}, "next": {"/ui/"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", s.admin)
		resp, err := client.Do(req) // follows the redirect to the overview
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := "Not replicating with Litestream: " + c.reason + "."; resp.StatusCode != 200 || !strings.Contains(string(page), want) {
			t.Errorf("serve %v: the overview (%d) does not say %q", c.args, resp.StatusCode, want)
		}
		// serve gives the console its entitlement checker: a customer's page
		// has its limits (no stripe: in this config, so no pushes).
		if resp, err = client.Get(s.admin + "/ui/customer?id=cus_1"); err != nil {
			t.Fatal(err)
		}
		page, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(page), "<h2>Limits this month</h2>") || strings.Contains(string(page), `id="stripe"`) {
			t.Errorf("serve %v: the customer page (%d) has no limits, or Stripe pushes:\n%s", c.args, resp.StatusCode, page)
		}
		s.stop(t)
	}
}
