package admin

import (
	"strings"
	"testing"

	"github.com/hookledger/hookledger/internal/testenv"
)

// Text PostgreSQL cannot store (a NUL, a byte that is not UTF-8) is a 400
// naming the field on both backends, and stores nothing: PostgreSQL
// answered a NUL in a name with 500 and its raw SQL error, SQLite stored it,
// and encoding/json turned a byte that is not UTF-8 into U+FFFD unseen.
func TestCustomersAPIRefusesUnstorableText(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e, _, url := customersEnv(t, backend)
		callJSON(t, "POST", url+"/v1/customers", `{"id":"cus_1","name":"Acme\tInc."}`, 201, nil)
		for _, tc := range []struct{ path, body, want string }{
			{"/v1/customers", `{"id":"cus_2","name":"Ac\u0000me"}`, `name: contains a NUL (U+0000)`},
			{"/v1/customers", "{\"id\":\"cus_2\",\"name\":\"Ac\xffme\"}", `name: is not valid UTF-8`},
			{"/v1/customers", `{"id":"cus_2","email":"a@b\u0000"}`, `email: contains a NUL (U+0000)`},
			{"/v1/customers", `{"id":"cus_2","note":"\u0000"}`, `note: contains a NUL (U+0000)`},
			{"/v1/customers", `{"id":"cus_2","plan":"basic","from":"2026-01-01","note":"x\u0000"}`, `note: contains a NUL (U+0000)`},
			{"/v1/customers", "{\"id\":\"cus_2\",\"external_ids\":{\"stripe\":\"cus_\xff\"}}", `external_ids: is not valid UTF-8`},
			{"/v1/customers", "{\"id\":\"cus_\xff\"}", `id: is not valid UTF-8`},
			{"/v1/customers/cus_1/plan", `{"plan":"pro","from":"2026-12-01","note":"\u0000"}`, `note: contains a NUL (U+0000)`},
			{"/v1/customers/cus_1/plan", "{\"plan\":\"pro\",\"from\":\"2026-12-01\",\"note\":\"\xc3\"}", `note: is not valid UTF-8`},
		} {
			code, raw := call(t, "POST", url+tc.path, testToken, tc.body)
			if code != 400 || !strings.Contains(string(raw), tc.want) || !strings.Contains(string(raw), `"code": "bad_request"`) {
				t.Errorf("POST %s %q: %d %s, want 400 with %q", tc.path, tc.body, code, raw, tc.want)
			}
		}
		cs, as := registry(t, e)
		sameRows(t, "customers rows", cs, []string{"cus_1 Acme\tInc.  {}"})
		sameRows(t, "assignment rows", as, nil)
	})
}
