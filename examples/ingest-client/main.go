// Command ingest-client sends a batch of usage events to hookledger's ingest
// API and retries the whole batch until it is answered 200 (docs/ingest.md).
package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"
)

func main() {
	body := []byte(`[{"specversion":"1.0","id":"job-1","source":"app","type":"usage.recorded","subject":"cus_1","data":{"meter":"api_requests","quantity":2}},
	                 {"specversion":"1.0","id":"job-2","source":"app","type":"usage.recorded","subject":"cus_2","data":{"meter":"api_requests","quantity":5}}]`)
	for attempt := 1; ; attempt++ {
		req, _ := http.NewRequest("POST", os.Getenv("HOOKLEDGER_URL")+"/v1/events", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/cloudevents-batch+json")
		req.Header.Set("Authorization", "Bearer "+os.Getenv("HOOKLEDGER_API_KEY"))
		wait := attempt // seconds; a connection error is retried too
		if resp, err := http.DefaultClient.Do(req); err == nil {
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 { // every event is durable; read each one's outcome in out
				fmt.Printf("%s\n", out)
				return
			}
			if resp.StatusCode != 503 && resp.StatusCode != 429 { // 4xx: fix the request, do not retry
				fmt.Fprintf(os.Stderr, "%s: %s\n", resp.Status, out)
				os.Exit(1)
			}
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
				wait = s
			}
		}
		time.Sleep(time.Duration(wait) * time.Second) // then the same body: what was stored comes back as duplicate

	}
}
