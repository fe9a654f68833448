package admin

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/hookledger/hookledger/ledger"
)

// maxVoidsPage bounds one page of GET /v1/voids.
const maxVoidsPage = 1000

// Voids answers GET /v1/voids: the ledger's void rows in id order, each with
// the row it voids (ref row:ID), the reason and actor, and when it was
// recorded; an amendment's corrected rows are under its event
// (EVENT_ID~amend) in the dispute trace. Pages: after=ID (the last id seen),
// limit=N (default and at most 1000). Register it on Server.Mux.
func Voids(db ledger.VoidReader) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := r.URL.Query()
		after, limit := int64(0), maxVoidsPage
		if s := v.Get("after"); s != "" {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n < 0 {
				usageError(w, http.StatusBadRequest, "after: want a ledger row id")
				return
			}
			after = n
		}
		if s := v.Get("limit"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n <= 0 || n > maxVoidsPage {
				usageError(w, http.StatusBadRequest, "limit: want 1 to 1000")
				return
			}
			limit = n
		}
		rows, err := ledger.Voids(r.Context(), db, after, limit)
		if err != nil {
			usageError(w, http.StatusInternalServerError, "reading voids failed")
			return
		}
		if rows == nil {
			rows = []ledger.Row{}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(rows)
	})
}
