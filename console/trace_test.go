package console

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hookledger/hookledger/dispute"
)

// The trace page's summary counts bodies and signatures as the CLI says
// them (dispute.Counts): ingest API events, verified by their API key and
// body digest, are counted, not left out.
func TestTraceSummaryCountsAPIKeyEvents(t *testing.T) {
	tr := &dispute.Trace{Target: "customer:cus_1/2026-10"}
	tr.Summary.Bodies = dispute.Counts{Valid: 2, APIKey: 13}
	tr.Summary.Signatures = dispute.Counts{APIKey: 13, Pruned: 1}
	var b bytes.Buffer
	if err := mustParse()["trace"].ExecuteTemplate(&b, "layout", view{Data: traceView{Target: tr.Target, Trace: tr}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"<dt>bodies</dt><dd>2 valid, 13 verified by API key, 0 invalid, 0 not verifiable, 0 pruned</dd>",
		"<dt>attempt signatures</dt><dd>0 valid, 13 verified by API key, 0 invalid, 0 not verifiable, 1 pruned</dd>",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the trace page lacks %q", want)
		}
	}
}
