package console

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/hookledger/hookledger/dispute"
)

type traceView struct {
	Target string
	Trace  *dispute.Trace
	Bundle string // the bundle download's URL
}

// trace shows what `hookledger dispute TARGET` shows: the invoice and its
// lines recomputed, the ledger rows with their chain check, and each event
// with its receipt, delivery attempts and re-verified signature.
func (c *Console) trace(w http.ResponseWriter, r *http.Request, s *session) {
	target := r.URL.Query().Get("target")
	tr, status, msg := c.traceOf(r, target)
	if tr == nil {
		if status == http.StatusInternalServerError {
			c.internal(w, r, s, errors.New(msg))
			return
		}
		c.fail(w, r, s, status, msg)
		return
	}
	c.render(w, r, s, http.StatusOK, "trace", "Dispute "+tr.Target, traceView{Target: tr.Target, Trace: tr,
		Bundle: withQuery("/ui/dispute/bundle", "target", tr.Target)})
}

func (c *Console) traceOf(r *http.Request, target string) (*dispute.Trace, int, string) {
	if _, err := dispute.ParseTarget(target); err != nil {
		return nil, http.StatusBadRequest, err.Error()
	}
	tr, err := c.Tracer.Trace(r.Context(), target)
	switch {
	case errors.Is(err, dispute.ErrNotFound):
		return nil, http.StatusNotFound, err.Error()
	case err != nil:
		return nil, http.StatusInternalServerError, err.Error()
	}
	return tr, http.StatusOK, ""
}

// bundle downloads the evidence bundle of a target: the bytes `hookledger
// dispute export TARGET` writes (the same Trace through the same
// WriteBundle), built in memory first so a failure is an error status and
// not half a zip.
func (c *Console) bundle(w http.ResponseWriter, r *http.Request) {
	target := r.URL.Query().Get("target")
	tr, status, msg := c.traceOf(r, target)
	if tr == nil {
		if status == http.StatusInternalServerError {
			c.Log.Error("console: bundle", "target", target, "error", msg)
			msg = "reading the database failed; the error is in serve's log"
		}
		http.Error(w, msg, status)
		return
	}
	var b bytes.Buffer
	if err := c.Tracer.Verifier.WriteBundle(&b, tr); err != nil {
		c.Log.Error("console: bundle", "target", target, "error", err.Error())
		http.Error(w, "writing the bundle failed; the error is in serve's log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/zip")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s"`, bundleName(tr.Target)))
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.Write(b.Bytes())
}

// bundleName is the download's file name: dispute-invoice-12-3.zip, with
// anything but letters, digits, '-', '_' and '.' replaced.
func bundleName(target string) string {
	var b strings.Builder
	b.WriteString("dispute-")
	for _, r := range target {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	if b.Len() > 120 {
		return b.String()[:120] + ".zip"
	}
	return b.String() + ".zip"
}
