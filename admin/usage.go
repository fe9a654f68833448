package admin

import (
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strings"

	"github.com/hookledger/hookledger/csvout"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// Usage answers GET /v1/usage with the same query as `hookledger usage`:
// from, to, tz, customer, meter, group_by (or group-by), where, as_of (or as-of).
// JSON by default; RFC 4180 CSV (cells guarded by csvout.Cell) when the client sends Accept: text/csv or
// format=csv. Register it on Server.Mux; the Server's bearer auth covers it.
func Usage(db *schema.DB, meters ledger.Meters) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := r.URL.Query()
		get := func(names ...string) string {
			for _, n := range names {
				if s := v.Get(n); s != "" {
					return s
				}
			}
			return ""
		}
		p := ledger.UsageParams{From: get("from"), To: get("to"), TZ: get("tz"), Customer: get("customer"), Meter: get("meter"),
			GroupBy: get("group_by", "group-by"), Where: get("where"), AsOf: get("as_of", "as-of")}
		q, err := p.Query(meters)
		if err != nil {
			usageError(w, http.StatusBadRequest, err.Error())
			return
		}
		if _, ok := v["group_by"]; ok && p.GroupBy == "" {
			q.GroupBy = []string{} // group_by= (empty): one total
		}
		format := v.Get("format")
		if format == "" {
			format = "json"
			if wantsCSV(r.Header.Get("Accept")) {
				format = "csv"
			}
		}
		if format != "json" && format != "csv" {
			usageError(w, http.StatusBadRequest, "format: want json or csv")
			return
		}
		rep, err := ledger.Query(r.Context(), db, q)
		switch {
		case errors.Is(err, ledger.ErrMixedMeters):
			usageError(w, http.StatusBadRequest, err.Error())
			return
		case err != nil:
			usageError(w, http.StatusInternalServerError, "usage query failed")
			return
		}
		if format == "csv" {
			w.Header().Set("Content-Type", "text/csv; charset=utf-8")
			header, rows := rep.Records()
			cw := csvout.NewWriter(w)
			cw.Write(header)
			cw.WriteAll(rows) // flushes; a write error means the client went away
			return
		}
		w.Header().Set("Content-Type", "application/json")
		lines := rep.Lines // the same array of lines as `hookledger usage --format json`
		if lines == nil {
			lines = []ledger.UsageLine{}
		}
		json.NewEncoder(w).Encode(lines)
	})
}

// wantsCSV reports whether an Accept header prefers text/csv over JSON.
func wantsCSV(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case "text/csv":
			return true
		case "application/json":
			return false
		}
	}
	return false
}

func usageError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
