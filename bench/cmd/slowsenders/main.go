// Command slowsenders measures what stalled, unauthenticated senders cost
// serve. It starts hookledger (default configuration), opens -c connections
// that each declare a -declare byte body to POST /webhooks/default, send
// -send bytes of it and stall; then, with every stalled connection still
// open, it sends one normal signed delivery and reports its status and
// latency, and serve's resident set (VmRSS now, VmHWM the peak) from
// /proc/PID/status while the stalled connections are held.
//
//	go run ./bench/cmd/slowsenders                      # builds hookledger from .
//	go run ./bench/cmd/slowsenders -binary ./hookledger -c 2000 -send 262000
//
// It needs a file-descriptor limit above -c (Go raises the soft limit to the
// hard one by itself; `ulimit -Hn` shows it).
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/hookledger/hookledger/bench"
	"github.com/hookledger/hookledger/bench/cmd/internal/harness"
	"github.com/hookledger/hookledger/scheme"
)

type options struct {
	conns, dialers int
	send, declare  int
	settle, hold   time.Duration
	binary, tmp    string
	keep           bool
}

func main() {
	var o options
	flag.IntVar(&o.conns, "c", 2000, "stalled connections")
	flag.IntVar(&o.send, "send", 262000, "body bytes each stalled connection sends before it stalls")
	flag.IntVar(&o.declare, "declare", 262144, "Content-Length each stalled connection declares (default: the default max_body)")
	flag.IntVar(&o.dialers, "dialers", 64, "connections opened at once")
	flag.DurationVar(&o.settle, "settle", 3*time.Second, "wait this long after the last stalled connection opened before the signed delivery")
	flag.DurationVar(&o.hold, "hold", 15*time.Second, "keep sampling memory this long after the signed delivery")
	flag.StringVar(&o.binary, "binary", "", "use this hookledger binary instead of building one")
	flag.StringVar(&o.tmp, "dir", "", "parent directory for the data directory (default: the system temp dir)")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary directory (log, database)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "slowsenders:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	if o.send > o.declare {
		return errors.New("-send must not exceed -declare: the connections stall before their body is complete")
	}
	h, err := harness.New(ctx, o.tmp, "hookledger-slowsenders-", o.binary, o.keep)
	if err != nil {
		return err
	}
	defer h.Close()
	harness.PrintMachine(os.Stdout)
	dir := filepath.Join(h.Dir, "serve")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	srv, err := h.Start(ctx, "serve", dir, filepath.Join(h.Dir, "serve.log"), "serve", "--listen", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer srv.Stop()
	addr := strings.TrimPrefix(srv.URL, "http://")
	rss0, _, err := srv.Memory()
	if err != nil {
		return err
	}
	fmt.Printf("serve idle: VmRSS %.0f MB\n", rss0)

	// Open the stalled connections.
	var peak float64 // the highest VmRSS sampled
	sample := func() {
		if rss, _, err := srv.Memory(); err == nil {
			peak = max(peak, rss)
		}
	}
	start := time.Now()
	stalled, err := bench.Stall{Addr: addr, Conns: o.conns, Send: int64(o.send), Declare: int64(o.declare), Dialers: o.dialers}.Open(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("opened %d stalled connections in %s (%d body bytes sent of %d declared, each)\n", stalled.Len(), time.Since(start).Round(time.Millisecond), o.send, o.declare)
	for t := time.Now(); time.Since(t) < o.settle; time.Sleep(100 * time.Millisecond) {
		sample()
	}
	rss, hwm, _ := srv.Memory()
	fmt.Printf("stalled connections held: VmRSS %.0f MB, VmHWM %.0f MB\n", rss, hwm)

	// One normal signed delivery while every stalled connection is open.
	done := make(chan string, 1)
	go func() { done <- signedDelivery(srv.URL, h.Secret()) }()
	var result string
	for result == "" {
		sample()
		select {
		case result = <-done:
		case <-time.After(100 * time.Millisecond):
		}
	}
	fmt.Printf("signed delivery during the stall: %s\n", result)
	for t := time.Now(); time.Since(t) < o.hold; time.Sleep(100 * time.Millisecond) {
		sample()
	}
	outcomes := stalled.Close()
	rss, hwm, _ = srv.Memory()
	fmt.Printf("after %s: VmRSS %.0f MB, sampled VmRSS peak %.0f MB, VmHWM %.0f MB\n", time.Since(start).Round(time.Second), rss, peak, hwm)
	keys := make([]string, 0, len(outcomes))
	for k := range outcomes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("  stalled connections %s: %d\n", k, outcomes[k])
	}
	return nil
}

// signedDelivery posts one Standard Webhooks usage event on a new connection
// and describes the answer and how long it took.
func signedDelivery(url, secret string) string {
	s, _ := scheme.New("standard", scheme.HMACOptions{})
	key, err := s.Key(secret)
	if err != nil {
		return "cannot sign: " + err.Error()
	}
	body := []byte(`{"type":"usage.recorded","data":{"customer":"cus_1","meter":"api_requests","quantity":1}}`)
	req, _ := http.NewRequest(http.MethodPost, url+"/webhooks/default", bytes.NewReader(body))
	s.Sign(req.Header, body, key, "evt_slowsenders", "", time.Now())
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Sprintf("failed after %s: %v", time.Since(start).Round(time.Millisecond), err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d in %s %s", resp.StatusCode, time.Since(start).Round(time.Millisecond), strings.TrimSpace(string(b)))
}
