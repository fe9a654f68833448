// Command ingest-client sends a batch of usage events to hookledger's ingest
// API and retries the whole batch, unchanged, on 503, 429 and connection
// errors, giving up after a few attempts (docs/ingest.md). From the
// repository root, with serve running:
//
//	HOOKLEDGER_URL=http://127.0.0.1:8080 HOOKLEDGER_API_KEY=hl_… go run ./examples/ingest-client
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"
)

const attempts = 5

func main() {
	body := []byte(`[{"specversion":"1.0","id":"job-1","source":"app","type":"usage.recorded","subject":"cus_1","data":{"meter":"api_requests","quantity":2}},
	                 {"specversion":"1.0","id":"job-2","source":"app","type":"usage.recorded","subject":"cus_2","data":{"meter":"api_requests","quantity":5}}]`)
	url, key := os.Getenv("HOOKLEDGER_URL"), os.Getenv("HOOKLEDGER_API_KEY")
	if url == "" || key == "" {
		fail("set HOOKLEDGER_URL (e.g. http://127.0.0.1:8080) and HOOKLEDGER_API_KEY (from hookledger keys create)")
	}
	client := &http.Client{Timeout: 30 * time.Second}
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequest("POST", url+"/v1/events", bytes.NewReader(body))
		if err != nil { // a malformed HOOKLEDGER_URL: no retry helps
			fail("%v", err)
		}
		req.Header.Set("Content-Type", "application/cloudevents-batch+json")
		req.Header.Set("Authorization", "Bearer "+key)
		wait := attempt // seconds
		resp, err := client.Do(req)
		if err == nil {
			var out []byte
			out, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case err != nil: // the answer was lost: retry
			case resp.StatusCode == 200: // every event is durable; read each one's outcome in out
				os.Stdout.Write(out)
				return
			case resp.StatusCode != 503 && resp.StatusCode != 429: // 4xx: fix the request, do not retry
				fail("%s: %s", resp.Status, bytes.TrimSpace(out))
			default:
				err = errors.New(resp.Status)
				if s, e := strconv.Atoi(resp.Header.Get("Retry-After")); e == nil {
					wait = s
				}
			}
		}
		fmt.Fprintf(os.Stderr, "ingest-client: attempt %d: %v\n", attempt, err)
		if attempt == attempts {
			fail("not stored after %d attempts: send the same batch again later", attempts)
		}
		time.Sleep(time.Duration(wait) * time.Second) // then the same body: what was stored comes back as duplicate
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "ingest-client: "+format+"\n", args...)
	os.Exit(1)
}
