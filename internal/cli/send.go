package cli

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/ingest"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/scheme"
)

func sendCommand() *cli.Command {
	return &cli.Command{
		Name:  "send",
		Usage: "sign one usage event exactly as a provider would and POST it",
		Description: "Builds {\"id\":ID,\"type\":TYPE,\"data\":{\"customer\",\"meter\",\"quantity\"[,\"occurred_at\"]}} (slack: with\n" +
			"\"event_id\":ID after id), or sends the bytes of --body FILE as they are (a provider-shaped event, any\n" +
			"scheme; the event id then defaults to the body's \"id\" or \"event_id\"), signs it with the provider's\n" +
			"scheme and secret, POSTs it and prints the response.\n" +
			"The provider, its scheme and its secret come from --config, else ./hookledger.yml, like every command.\n" +
			"--secret overrides the configured secret. HOOKLEDGER_SECRET is used only when no config file is\n" +
			"found (the embedded default provider), else the generated default secret in --data; set beside a\n" +
			"configured provider whose secret differs, it is refused, as one of the two is stale.",
		Flags: append(signerFlags("hookledger base URL", "data directory holding the generated default secret"),
			&cli.StringFlag{Name: "id", Usage: "event id (default: a random evt_…); send the same id twice to see deduplication"},
			&cli.StringFlag{Name: "type", Value: "usage.recorded", Usage: "event type"},
			&cli.StringFlag{Name: "customer", Value: "cus_1", Usage: "customer id"},
			&cli.StringFlag{Name: "meter", Value: "api_requests", Usage: "meter name"},
			&cli.StringFlag{Name: "quantity", Value: "1", Usage: "quantity, an exact decimal (up to 6 places)"},
			&cli.StringFlag{Name: "occurred-at", Usage: "event time, RFC 3339 (default: omitted, so the receipt time is used)"},
			&cli.StringFlag{Name: "body", Usage: "send this file's bytes as the body instead, e.g. a provider's own event JSON (- for stdin)"},
			&cli.BoolFlag{Name: "api", Usage: "send to the ingest API (POST /v1/events) with --key instead, as one CloudEvent; " +
				"--customer is its subject, --occurred-at its time; a --body array is sent as generic events"},
			&cli.StringFlag{Name: "key", EnvVars: []string{"HOOKLEDGER_API_KEY"}, Usage: "with --api: the API key (hl_…)"},
			&cli.StringFlag{Name: "source", Value: "hookledger-send", Usage: "with --api: the CloudEvent's source"},
		),
		Action: send,
	}
}

func send(c *cli.Context) error {
	if c.Bool("api") {
		return sendAPI(c)
	}
	s, key, from, err := signer(c)
	if err != nil {
		return err
	}
	id := c.String("id")
	var body []byte
	if c.String("body") != "" {
		if body, err = sendBody(c, s.Name(), id); err != nil {
			return err
		}
		if id == "" {
			id = bodyID(body)
		}
	}
	if id == "" {
		var b [12]byte
		rand.Read(b[:])
		id = "evt_" + hex.EncodeToString(b[:])
	}
	if body == nil {
		if body, err = sendBody(c, s.Name(), id); err != nil {
			return err
		}
	}

	url, err := serverURL(c, "/webhooks/", "/webhooks/"+c.String("provider"))
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(c.Context, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "hookledger-send/"+build.Version)
	s.Sign(req.Header, body, key, id, c.String("type"), time.Now())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return postError(url, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	err = printResponse(c, resp, out)
	if resp.StatusCode == http.StatusUnauthorized && from != "--secret" { // a --secret is the sender's own choice
		fmt.Fprintf(c.App.ErrWriter, "hookledger: send signed with the secret from %s; serve holds another "+
			"(zero-config serve keeps its generated one in DATA/%s, a configured provider its secrets)\n", from, config.SecretFile)
	}
	return err
}

// printResponse prints the status line and the body; non-2xx exits 1.
func printResponse(c *cli.Context, resp *http.Response, out []byte) error {
	fmt.Fprintf(c.App.Writer, "%s %s\n", resp.Proto, resp.Status)
	c.App.Writer.Write(out)
	if resp.StatusCode/100 != 2 {
		return cli.Exit("", 1)
	}
	return nil
}

// sendAPI is send --api: one CloudEvent (or --body's bytes) to POST /v1/events.
func sendAPI(c *cli.Context) error {
	key, err := apiKey(c)
	if err != nil {
		return err
	}
	contentType := ingest.MediaCloudEvent
	var body []byte
	if c.String("body") != "" {
		if body, err = sendBody(c, "", ""); err != nil {
			return err
		}
		if t := bytes.TrimSpace(body); len(t) > 0 && t[0] == '[' {
			contentType = ingest.MediaGeneric
		}
	} else if body, err = sendCloudEvent(c); err != nil {
		return err
	}
	url, err := eventsURL(c)
	if err != nil {
		return err
	}
	resp, out, err := postEvents(c.Context, url, key, contentType, body)
	if err != nil {
		return err
	}
	return printResponse(c, resp, out)
}

// sendCloudEvent is the CloudEvent send --api builds: the customer is its
// subject and --occurred-at its time, which the usage mappings use where
// their paths find nothing (data.customer, data.occurred_at by default).
func sendCloudEvent(c *cli.Context) ([]byte, error) {
	q, err := ledger.ParseRowQuantity(c.String("quantity"))
	if err != nil {
		return nil, fmt.Errorf("--quantity: %w", err)
	}
	id := c.String("id")
	if id == "" {
		var b [12]byte
		rand.Read(b[:])
		id = "evt_" + hex.EncodeToString(b[:])
	}
	ev := struct {
		SpecVersion string `json:"specversion"`
		ID          string `json:"id"`
		Source      string `json:"source"`
		Type        string `json:"type"`
		Subject     string `json:"subject"`
		Time        string `json:"time,omitempty"`
		Data        struct {
			Meter    string      `json:"meter"`
			Quantity json.Number `json:"quantity"`
		} `json:"data"`
	}{SpecVersion: "1.0", ID: id, Source: c.String("source"), Type: c.String("type"), Subject: c.String("customer")}
	ev.Data.Meter, ev.Data.Quantity = c.String("meter"), json.Number(q.String())
	if at := c.String("occurred-at"); at != "" {
		if _, err := time.Parse(time.RFC3339Nano, at); err != nil {
			return nil, fmt.Errorf("--occurred-at: %q is not an RFC 3339 time", at)
		}
		ev.Time = at
	}
	return json.Marshal(ev)
}

// secretFlag is --secret for send and bench. HOOKLEDGER_SECRET is not its
// environment variable: signer decides when that variable applies.
func secretFlag() cli.Flag {
	return &cli.StringFlag{Name: "secret",
		Usage: "signing secret (default: the provider's in the config; without a config file HOOKLEDGER_SECRET, else the generated default secret in --data)"}
}

// signer resolves the scheme and key for send and bench: the provider in
// --config or ./hookledger.yml (its scheme and first secret), else the
// embedded default provider's secret (HOOKLEDGER_SECRET or the generated one
// in --data). --secret and --scheme override. It also says where the secret
// came from, for send to tell a sender whose signature serve refused.
func signer(c *cli.Context) (scheme.Scheme, []byte, string, error) {
	name, schemeName, secret := c.String("provider"), c.String("scheme"), c.String("secret")
	from := "--secret"
	env := os.Getenv("HOOKLEDGER_SECRET")
	var hmacOpts scheme.HMACOptions
	if path := configPath(c); path != "" {
		cfg, err := config.LoadSecretsOptional(path)
		if err != nil {
			return nil, nil, "", err
		}
		p, err := lookupProvider(cfg, name)
		if err != nil {
			return nil, nil, "", fmt.Errorf("%w in %s", err, path)
		}
		if schemeName == "" {
			schemeName = p.Scheme
		}
		hmacOpts = p.HMAC
		switch {
		case secret != "":
		case len(p.Secrets) == 0:
			return nil, nil, "", fmt.Errorf("provider %q in %s has no secret here (%s): set it, or pass --secret", name, path, strings.Join(cfg.Unresolved, "; "))
		case env != "" && env != p.Secrets[0].Value:
			return nil, nil, "", fmt.Errorf("HOOKLEDGER_SECRET is set, and provider %q in %s has a different secret: unset HOOKLEDGER_SECRET, or pass --secret to choose", name, path)
		default:
			secret, from = p.Secrets[0].Value, fmt.Sprintf("provider %q in %s", name, path)
		}
	}
	if secret == "" && env != "" {
		secret, from = env, "HOOKLEDGER_SECRET"
	}
	if schemeName == "" {
		schemeName = "standard"
	}
	if secret == "" {
		b, err := os.ReadFile(filepath.Join(c.String("data"), config.SecretFile))
		if err != nil {
			return nil, nil, "", fmt.Errorf("no secret: pass --secret or set HOOKLEDGER_SECRET (no generated secret in %s: %v)", c.String("data"), err)
		}
		secret, from = strings.TrimSpace(string(b)), filepath.Join(c.String("data"), config.SecretFile)
	}
	s, err := scheme.New(schemeName, hmacOpts)
	if err != nil {
		return nil, nil, "", err
	}
	key, err := s.Key(secret)
	if err != nil {
		return nil, nil, "", fmt.Errorf("secret: %w", err)
	}
	return s, key, from, nil
}

// signerFlags are the flags of the commands that sign as a provider would
// (send, bench): where to post, which provider, scheme and secret. url and
// data describe --url and --data for the command.
func signerFlags(url, data string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "url", Value: "http://localhost:8080", EnvVars: []string{"HOOKLEDGER_URL"},
			DefaultText: "where the config's listen serves, else http://localhost:8080",
			Usage:       url + " (the path /webhooks/PROVIDER is added) or a full webhook URL"},
		&cli.StringFlag{Name: "provider", Value: "default", EnvVars: []string{"HOOKLEDGER_PROVIDER"}, Usage: "provider name"},
		&cli.StringFlag{Name: "scheme", EnvVars: []string{"HOOKLEDGER_SCHEME"},
			Usage: "signature scheme (" + strings.Join(scheme.Names(), ", ") + "); default: the provider's in --config, else standard"},
		secretFlag(),
		&cli.StringFlag{Name: "config", Aliases: []string{"c"}, EnvVars: []string{"HOOKLEDGER_CONFIG"},
			Usage: "config file to take the provider's scheme and secret from (default: ./hookledger.yml if it exists)"},
		&cli.StringFlag{Name: "data", Value: config.DefaultData, EnvVars: []string{"HOOKLEDGER_DATA"}, Usage: data},
	}
}

// sendEvent is the body send builds, in the order the README shows it.
type sendEvent struct {
	ID      string        `json:"id"`
	EventID string        `json:"event_id,omitempty"` // Slack carries the id in the body as event_id
	Type    string        `json:"type"`
	Data    sendEventData `json:"data"`
}

type sendEventData struct {
	Customer   string      `json:"customer"`
	Meter      string      `json:"meter"`
	Quantity   json.Number `json:"quantity"`
	OccurredAt string      `json:"occurred_at,omitempty"`
}

// sendBody is --body's bytes, or the generic usage event.
func sendBody(c *cli.Context, schemeName, id string) ([]byte, error) {
	switch f := c.String("body"); f {
	case "":
	case "-":
		return io.ReadAll(os.Stdin)
	default:
		return os.ReadFile(f)
	}
	q, err := ledger.ParseRowQuantity(c.String("quantity"))
	if err != nil {
		return nil, fmt.Errorf("--quantity: %w", err)
	}
	ev := sendEvent{ID: id, Type: c.String("type"),
		Data: sendEventData{Customer: c.String("customer"), Meter: c.String("meter"), Quantity: json.Number(q.String())}}
	if at := c.String("occurred-at"); at != "" {
		if _, err := time.Parse(time.RFC3339Nano, at); err != nil {
			return nil, fmt.Errorf("--occurred-at: %q is not an RFC 3339 time", at)
		}
		ev.Data.OccurredAt = at
	}
	if schemeName == "slack" {
		ev.EventID = id
	}
	return json.Marshal(ev)
}

// bodyID is the event id a provider-shaped body carries ("id", or Slack's
// "event_id"), so the headers name the same event the body does.
func bodyID(body []byte) string {
	var ids struct {
		ID      string `json:"id"`
		EventID string `json:"event_id"`
	}
	json.Unmarshal(body, &ids)
	if ids.ID != "" {
		return ids.ID
	}
	return ids.EventID
}
