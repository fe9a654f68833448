// Command app is the smallest application behind hookledger's forwarding
// (docs/forwarding.md): it verifies each forwarded request with the Standard
// Webhooks library, and processes each message once however often it
// arrives, by its webhook-id. hookledger delivers at least once, so an
// application must dedupe; a real one records the webhook-id in the same
// transaction as the work it does (here, a map).
//
//	APP_SECRET=whsec_… go run ./examples/forwarding/app --listen 127.0.0.1:8090
package main

import (
	"context"
	"flag"
	"io"
	"log"
	"net/http"
	"os"
	"sync"
	"time"

	standardwebhooks "github.com/svix/svix-webhooks/go"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8090", "address to listen on")
	flaky := flag.Bool("flaky", false, "answer 503 the first time each message arrives, after processing it, "+
		"as an application that crashed before it could answer would")
	exitAfter := flag.Int("exit-after", 0, "exit after answering 2xx this many times (0: never)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("app: ")
	wh, err := standardwebhooks.NewWebhook(os.Getenv("APP_SECRET"))
	if err != nil {
		log.Fatalf("APP_SECRET: %v", err)
	}
	var (
		mu        sync.Mutex
		processed = map[string]bool{} // webhook-id -> done
		answered  int
	)
	done := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		// The signature covers webhook-id, webhook-timestamp and the body:
		// a request that does not verify is not from hookledger.
		if err := wh.Verify(body, r.Header); err != nil {
			log.Printf("rejected: %v", err)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		id, event := r.Header.Get("webhook-id"), r.Header.Get("X-Hookledger-Event-Id")
		mu.Lock()
		defer mu.Unlock()
		if processed[id] {
			log.Printf("%s (%s): a duplicate, already processed: answering 204", event, id)
		} else {
			processed[id] = true
			log.Printf("%s (%s): %s from %s: processed", event, id, r.Header.Get("X-Hookledger-Event-Type"),
				r.Header.Get("X-Hookledger-Provider"))
			if *flaky {
				log.Printf("%s (%s): answering 503, as if the app had crashed before answering", event, id)
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
		}
		w.WriteHeader(http.StatusNoContent)
		if answered++; answered == *exitAfter {
			close(done)
		}
	})
	srv := &http.Server{Addr: *listen, Handler: mux}
	go func() {
		log.Printf("listening on %s", *listen)
		if err := srv.ListenAndServe(); err != http.ErrServerClosed {
			log.Fatal(err)
		}
	}()
	<-done
	// Shutdown lets the last answer reach hookledger before the process ends.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(ctx)
	log.Printf("answered 2xx %d times: exiting", *exitAfter)
}
