package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ingest"
	"github.com/hookledger/hookledger/payload"
	"github.com/hookledger/hookledger/receiver"
)

func ingestCommand() *cli.Command {
	return &cli.Command{
		Name:      "ingest",
		Usage:     "send usage events from a file, one JSON event a line, to a running serve's ingest API",
		ArgsUsage: "FILE.jsonl|-",
		Description: "Backfills and imports: reads one event a line (a generic usage event, or with --cloudevents a\n" +
			"CloudEvent), posts them in batches of --batch to POST /v1/events with the API key, and prints a\n" +
			"summary of the outcomes. It goes through serve, so the key, its rate limit, the writer and the\n" +
			"ACK-after-replica mode apply exactly as for any client; it needs no access to the data directory.\n" +
			"A batch answered 503 or 429 is sent again after Retry-After (its stored events come back as\n" +
			"duplicates), so running the same file twice adds nothing. A line that is not JSON (or nests deeper\n" +
			"than serve takes) would make serve refuse its whole batch: it is skipped and the rest is sent. A\n" +
			"line longer than --max-body is sent alone, so serve's refusal of it stops nothing either. Exits 3\n" +
			"when a line was skipped, or an event was rejected, failed (stored, but its mapping could not use\n" +
			"it) or its id was already stored with a different body (payload_mismatch), listing them by line\n" +
			"with the reason (the first 20 in the table, all in JSON).",
		// --config as every command takes it: its listen is the default --url.
		Flags: append(append([]cli.Flag{configFlags()[0]}, apiClientFlags()...),
			&cli.IntFlag{Name: "batch", Value: 500, EnvVars: []string{"HOOKLEDGER_INGEST_BATCH"},
				Usage: "events per request (at most serve's ingest.max_events)"},
			&cli.IntFlag{Name: "max-body", Value: 1 << 20, EnvVars: []string{"HOOKLEDGER_INGEST_MAX_BODY"},
				Usage: "bytes per request: a batch is sent early rather than grow past it (serve's ingest.max_body)"},
			&cli.BoolFlag{Name: "cloudevents", Usage: "the lines are CloudEvents (sent as application/cloudevents-batch+json)"},
			formatFlag(),
		),
		Action: ingestAction,
	}
}

// apiClientFlags are the flags of the commands that post to the ingest API.
func apiClientFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "url", Value: "http://localhost:8080", EnvVars: []string{"HOOKLEDGER_URL"},
			DefaultText: "where the config's listen serves, else http://localhost:8080",
			Usage:       "hookledger base URL (the path /v1/events is added)"},
		&cli.StringFlag{Name: "key", EnvVars: []string{"HOOKLEDGER_API_KEY"}, Usage: "API key (hl_…; hookledger keys create NAME)"},
	}
}

// eventsURL is the ingest API's URL (serverURL).
func eventsURL(c *cli.Context) (string, error) { return serverURL(c, "/v1/events", "/v1/events") }

func apiKey(c *cli.Context) (string, error) {
	key := c.String("key")
	if key == "" {
		return "", usageErrorf(c, "--key (or HOOKLEDGER_API_KEY) is required: create one with hookledger keys create NAME")
	}
	parsed, err := ingest.ParseBearer("Bearer " + key)
	if err != nil {
		return "", usageErrorf(c, "--key: not an API key: %s", keyShape(strings.TrimSpace(key)))
	}
	return parsed, nil
}

// keyShape says how key differs from the shape of every API key, without
// repeating the key.
func keyShape(key string) string {
	shape := fmt.Sprintf("an API key is %s followed by %d base64url characters (A-Z, a-z, 0-9, - and _)", ingest.KeyPrefix, ingest.KeyChars)
	rest, ok := strings.CutPrefix(key, ingest.KeyPrefix)
	if !ok {
		return fmt.Sprintf("it does not start with %s; %s", ingest.KeyPrefix, shape)
	}
	if i := strings.IndexFunc(rest, notBase64URL); i >= 0 {
		r, _ := utf8.DecodeRuneInString(rest[i:])
		return fmt.Sprintf("character %d after %s is %q; %s", utf8.RuneCountInString(rest[:i])+1, ingest.KeyPrefix, r, shape)
	}
	return fmt.Sprintf("%d %s %s; %s", len(rest), plural(len(rest), "character follows", "characters follow"), ingest.KeyPrefix, shape)
}

func notBase64URL(r rune) bool {
	return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
}

// postEvents posts one body to the ingest API and reads the answer.
func postEvents(ctx context.Context, url, key, contentType string, body []byte) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("User-Agent", "hookledger/"+build.Version)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, postError(url, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp, out, err
}

// ingestLine is one event of the file with its line number.
type ingestLine struct {
	n   int
	raw []byte
}

// ingestSkipped is the outcome of a line ingest does not send: serve would
// refuse it, and with it the whole batch it is in.
const ingestSkipped = "skipped"

// ingestProblem is an event not stored as sent.
type ingestProblem struct {
	Line    int    `json:"line"`
	ID      string `json:"id,omitempty"`
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
	Error   string `json:"error,omitempty"`
}

// ingestSummary is what ingest prints.
type ingestSummary struct {
	Events   int             `json:"events"`
	Requests int             `json:"requests"`
	Counts   map[string]int  `json:"counts"`
	Problems []ingestProblem `json:"problems,omitempty"`
}

func ingestAction(c *cli.Context) error {
	args := positional(c)
	if len(args) != 1 {
		return usageErrorf(c, "want one argument: a file of one JSON event a line, or - for stdin")
	}
	key, err := apiKey(c)
	if err != nil {
		return err
	}
	size := c.Int("batch")
	if size < 1 {
		return usageErrorf(c, "--batch must be at least 1, got %d", size)
	}
	contentType := ingest.MediaGeneric
	if c.Bool("cloudevents") {
		contentType = ingest.MediaCloudEventBatch
	}
	in, total := io.Reader(os.Stdin), -1
	if args[0] != "-" {
		f, err := os.Open(args[0])
		if err != nil {
			return err
		}
		defer f.Close()
		if total, err = countLines(f); err != nil {
			return err
		}
		in = f
	}
	url, err := eventsURL(c)
	if err != nil {
		return err
	}
	ctx, stop := signalContext(c)
	defer stop()
	var done atomic.Int64
	stopBar := progress(total, "ingesting", &done)
	sum := &ingestSummary{Counts: map[string]int{}}
	skip := func(p ingestProblem) {
		sum.Counts[p.Outcome]++
		sum.Problems = append(sum.Problems, p)
		done.Add(1)
	}
	err = readBatches(in, size, c.Int("max-body"), skip, func(batch []ingestLine) error {
		if err := sendBatch(ctx, url, key, contentType, batch, sum); err != nil {
			return err
		}
		done.Add(int64(len(batch)))
		return nil
	})
	stopBar()
	// Lines skipped while a batch was filling come before that batch's answers.
	sort.SliceStable(sum.Problems, func(i, j int) bool { return sum.Problems[i].Line < sum.Problems[j].Line })
	if ctx.Err() != nil {
		return interrupted(fmt.Sprintf("%d events sent in %d requests; every event of an answered request is stored (send the file again: what is stored comes back as duplicates)",
			sum.Events, sum.Requests))
	}
	if err != nil {
		return err
	}
	if err := writeIngestSummary(c, sum); err != nil {
		return err
	}
	if len(sum.Problems) > 0 {
		failed := sum.Counts[string(custody.StatusFailed)]
		n := len(sum.Problems) - failed
		switch {
		case failed == 0:
			return problem(fmt.Errorf("%d %s not stored as sent", n, plural(n, "event was", "events were")))
		case n == 0:
			return problem(fmt.Errorf("%d %s stored as failed: the mapping could not use %s (fix it, then hookledger replay)",
				failed, plural(failed, "event was", "events were"), plural(failed, "it", "them")))
		}
		return problem(fmt.Errorf("%d %s not stored as sent, and %d stored as failed (fix the mapping, then hookledger replay)",
			n, plural(n, "event was", "events were"), failed))
	}
	return nil
}

// countLines counts the lines of f and rewinds it (for the progress bar).
func countLines(f *os.File) (int, error) {
	n, err := readLines(f, func(ingestLine) error { return nil })
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	return n, err
}

// readLines calls fn for every non-blank line of r.
func readLines(r io.Reader, fn func(ingestLine) error) (int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	n, events := 0, 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		events++
		if err := fn(ingestLine{n: n, raw: bytes.Clone(line)}); err != nil {
			return events, err
		}
	}
	if err := sc.Err(); err != nil {
		return events, fmt.Errorf("line %d: %w", n+1, err)
	}
	return events, nil
}

// readBatches hands fn the lines of r, size at a time, and fewer when more
// would make a body (the lines, a comma each and the brackets) over maxBody.
// A line serve would refuse with the whole batch (checkLine) goes to skip
// instead, so the other lines of its batch are sent.
func readBatches(r io.Reader, size, maxBody int, skip func(ingestProblem), fn func([]ingestLine) error) error {
	batch := make([]ingestLine, 0, size)
	bytes := 2
	_, err := readLines(r, func(l ingestLine) error {
		if p, bad := checkLine(l); bad {
			skip(p)
			return nil
		}
		if len(batch) > 0 && bytes+len(l.raw)+1 > maxBody {
			if err := fn(batch); err != nil {
				return err
			}
			batch, bytes = batch[:0], 2
		}
		batch, bytes = append(batch, l), bytes+len(l.raw)+1
		if len(batch) < size {
			return nil
		}
		err := fn(batch)
		batch, bytes = batch[:0], 2
		return err
	})
	if err == nil && len(batch) > 0 {
		err = fn(batch)
	}
	return err
}

// checkLine says why serve would refuse a batch holding line l as a whole,
// with the check serve makes (ingest.Parse): the line must be one JSON value
// nesting no deeper than serve's limit less the batch's array. A line that
// passes is one element of the batch, so serve's answer for it is the one at
// its index; whether it is an event (an object with an id, ...) is serve's
// to say, for that line alone.
func checkLine(l ingestLine) (ingestProblem, bool) {
	p := ingestProblem{Line: l.n, Outcome: ingestSkipped}
	switch err := payload.Check(l.raw, config.DefaultMaxDepth-1); {
	case errors.Is(err, payload.ErrTooDeep):
		p.Reason = "too_deep"
		p.Error = fmt.Sprintf("nests more than %d levels deep (serve's limit, %d, counts the batch's array)", config.DefaultMaxDepth-1, config.DefaultMaxDepth)
	case err != nil:
		p.Reason, p.Error = "not_json", "not valid JSON"
		var v json.RawMessage
		if err := json.Unmarshal(l.raw, &v); err != nil {
			p.Error += ": " + err.Error()
		}
	default:
		return ingestProblem{}, false
	}
	return p, true
}

// ingestAttempts bounds how often one batch is sent again after 503, 429 or
// a connection error.
const ingestAttempts = 10

// sendBatch posts one batch until it is answered 200 and adds its outcomes.
func sendBatch(ctx context.Context, url, key, contentType string, batch []ingestLine, sum *ingestSummary) error {
	var body bytes.Buffer
	body.WriteByte('[')
	for i, l := range batch {
		if i > 0 {
			body.WriteByte(',')
		}
		body.Write(l.raw)
	}
	body.WriteByte(']')
	where := fmt.Sprintf("lines %d-%d", batch[0].n, batch[len(batch)-1].n)
	for attempt := 1; ; attempt++ {
		resp, out, err := postEvents(ctx, url, key, contentType, body.Bytes())
		var wait time.Duration
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			wait = time.Duration(attempt) * 500 * time.Millisecond
		case resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusTooManyRequests:
			wait = time.Second
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
				wait = time.Duration(s) * time.Second
			}
		case resp.StatusCode != http.StatusOK:
			var e receiver.APIError
			json.Unmarshal(out, &e)
			if e.Error == "" {
				e.Error = strings.TrimSpace(string(out))
			}
			if len(batch) == 1 && lineRefused(resp.StatusCode, e) {
				if e.Reason == "too_large" {
					e.Error += ": the line alone is over serve's ingest.max_body"
				}
				sum.Requests++
				sum.Events++
				sum.Counts[receiver.EventRejected]++
				sum.Problems = append(sum.Problems, ingestProblem{Line: batch[0].n, Outcome: receiver.EventRejected, Reason: e.Reason, Error: e.Error})
				return nil
			}
			return fmt.Errorf("%s: %s: %s%s", where, resp.Status, e.Error, refusedHint(e, len(batch)))
		default:
			return addOutcomes(out, batch, where, sum)
		}
		if attempt == ingestAttempts {
			if err == nil {
				err = fmt.Errorf("%s", resp.Status)
			}
			return fmt.Errorf("%s: not stored after %d attempts: %w", where, attempt, err)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// lineRefused says whether serve's refusal of a batch of one line is about
// that line (longer than serve's ingest.max_body, or a body serve cannot
// read), not about the key or the request, so the next lines may fare better.
func lineRefused(status int, e receiver.APIError) bool {
	return status == http.StatusRequestEntityTooLarge && e.Reason == "too_large" || status == http.StatusBadRequest
}

// serve's refusals of a batch too big for its ingest.max_events
// (ingest.ErrTooMany) or ingest.max_body (receiver's bodyError).
var (
	perRequest = regexp.MustCompile(`at most (\d+) per request`)
	bodyLimit  = regexp.MustCompile(`body exceeds (\d+) bytes`)
)

// refusedHint is the flag that makes the next run's batches fit serve's
// limits, when serve refused a batch of events as too big.
func refusedHint(e receiver.APIError, events int) string {
	switch {
	case e.Reason == "too_many_events":
		if m := perRequest.FindStringSubmatch(e.Error); m != nil {
			return fmt.Sprintf(": pass --batch %s (serve's ingest.max_events)", m[1])
		}
		return ": pass a smaller --batch (serve's ingest.max_events)"
	case e.Reason == "too_large" && events > 1: // one line over the limit fits no batch
		if m := bodyLimit.FindStringSubmatch(e.Error); m != nil {
			return fmt.Sprintf(": pass --max-body %s (serve's ingest.max_body)", m[1])
		}
		return ": pass a smaller --max-body (serve's ingest.max_body)"
	}
	return ""
}

func addOutcomes(out []byte, batch []ingestLine, where string, sum *ingestSummary) error {
	var rep receiver.EventsReply
	if err := json.Unmarshal(out, &rep); err != nil || len(rep.Results) != len(batch) {
		return fmt.Errorf("%s: the answer does not list every event (%d of %d)", where, len(rep.Results), len(batch))
	}
	sum.Requests++
	sum.Events += len(batch)
	for i, r := range rep.Results {
		sum.Counts[r.Outcome]++
		if r.Outcome == receiver.EventRejected || r.Outcome == "payload_mismatch" || r.Outcome == string(custody.StatusFailed) {
			sum.Problems = append(sum.Problems, ingestProblem{Line: batch[i].n, ID: r.ID, Outcome: r.Outcome, Reason: r.Reason, Error: r.Error})
		}
	}
	return nil
}

func writeIngestSummary(c *cli.Context, sum *ingestSummary) error {
	outcomes := make([]string, 0, len(sum.Counts))
	for o := range sum.Counts {
		outcomes = append(outcomes, o)
	}
	sort.Slice(outcomes, func(i, j int) bool { return outcomeOrder(outcomes[i]) < outcomeOrder(outcomes[j]) })
	var rows [][]string
	for _, o := range outcomes {
		rows = append(rows, []string{o, itoa(sum.Counts[o])})
	}
	if err := writeRecords(c.App.Writer, c.String("format"), []string{"outcome", "events"}, rows, sum); err != nil {
		return err
	}
	if c.String("format") == "table" {
		for i, p := range sum.Problems {
			if i == 20 {
				fmt.Fprintf(c.App.Writer, "… and %d more\n", len(sum.Problems)-20)
				break
			}
			msg := p.Error
			if p.Outcome == "payload_mismatch" {
				msg = "this id is already stored with a different body"
			}
			fmt.Fprintf(c.App.Writer, "line %d: %s: %s\n", p.Line, p.Outcome, msg)
		}
	}
	return nil
}

func outcomeOrder(o string) int {
	for i, x := range []string{"applied", "ignored", "failed", "duplicate", "payload_mismatch", receiver.EventRejected, ingestSkipped} {
		if o == x {
			return i
		}
	}
	return 99
}
