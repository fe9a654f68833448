package cli

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/ingest"
	"github.com/hookledger/hookledger/schema"
)

func keysCommand() *cli.Command {
	return &cli.Command{
		Name:  "keys",
		Usage: "create, list and revoke API keys of the ingest API (POST /v1/events)",
		Description: "An API key authenticates POST /v1/events (Authorization: Bearer hl_…). Only its SHA-256 is\n" +
			"stored; the key is shown once, by create. Its NAME is its scope: its events are stored under\n" +
			"provider api:NAME, which never collides with a configured provider (their names have no ':').\n" +
			"Several keys may share a name (rotation: create the new one, move the client, revoke the old).\n" +
			"A running serve reads keys from the database: a new key works at once, a revoked one stops\n" +
			"working within ingest.key_cache (default 1s).",
		Subcommands: []*cli.Command{
			{
				Name:      "create",
				Usage:     "create a key and print it (once)",
				ArgsUsage: "NAME",
				Flags: append(configFlags(),
					&cli.Float64Flag{Name: "rate", Usage: "rate limit in requests per second (0: none); over it, 429 with Retry-After"},
					&cli.IntFlag{Name: "burst", Usage: "requests allowed at once above the rate", DefaultText: "the rate, rounded up"},
					&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print only the key (for scripts)"},
				),
				Action: keysCreate,
			},
			{
				Name:   "list",
				Usage:  "list keys (never the keys themselves: their first characters)",
				Flags:  append(configFlags(), formatFlag()),
				Action: keysList,
			},
			{
				Name:      "revoke",
				Usage:     "revoke a key for good (its events stay)",
				ArgsUsage: "ID",
				Flags:     configFlags(),
				Action:    keysRevoke,
			},
		},
	}
}

func keysCreate(c *cli.Context) error {
	args := positional(c)
	if len(args) != 1 {
		return usageErrorf(c, "want one argument, the key's NAME")
	}
	name := args[0]
	if err := ingest.CheckName(name); err != nil {
		return usageErrorf(c, "%v", err)
	}
	rate, burst := c.Float64("rate"), c.Int("burst")
	switch {
	case rate < 0:
		return usageErrorf(c, "--rate must not be negative, got %g", rate)
	case burst < 0:
		return usageErrorf(c, "--burst must not be negative, got %d", burst)
	case burst > 0 && rate == 0:
		return usageErrorf(c, "--burst needs --rate")
	}
	db, err := openWritable(c)
	if err != nil {
		return err
	}
	defer db.Close()
	key, sum, prefix, err := ingest.NewKey()
	if err != nil {
		return err
	}
	k, err := db.InsertAPIKey(c.Context, schema.APIKey{Name: name, Prefix: prefix, SHA256: sum[:], RateLimit: rate, Burst: burst,
		CreatedAt: time.Now().UnixMilli()})
	if err != nil {
		return err
	}
	if c.Bool("quiet") {
		fmt.Fprintln(c.App.Writer, key)
		return nil
	}
	fmt.Fprintf(c.App.Writer, "API key %d %q created; its events are stored under provider %s.\n"+
		"The key is shown only now (hookledger keeps its SHA-256):\n\n    %s\n\n", k.ID, k.Name, ingest.Scope(k.Name), key)
	return nil
}

func keysList(c *cli.Context) error {
	db, err := openExisting(c)
	if err != nil {
		return err
	}
	defer db.Close()
	ks, err := db.APIKeys(c.Context)
	if err != nil {
		return err
	}
	type view struct {
		ID        int64      `json:"id"`
		Name      string     `json:"name"`
		Scope     string     `json:"scope"`
		Prefix    string     `json:"prefix"`
		RateLimit float64    `json:"rate_limit"`
		Burst     int        `json:"burst"`
		CreatedAt time.Time  `json:"created_at"`
		RevokedAt *time.Time `json:"revoked_at"`
	}
	views := make([]view, 0, len(ks))
	var rows [][]string
	for _, k := range ks {
		v := view{ID: k.ID, Name: k.Name, Scope: ingest.Scope(k.Name), Prefix: k.Prefix + "…", RateLimit: k.RateLimit,
			CreatedAt: time.UnixMilli(k.CreatedAt).UTC()}
		revoked, rate := "", "-"
		if k.RevokedAt != nil {
			t := time.UnixMilli(*k.RevokedAt).UTC()
			v.RevokedAt, revoked = &t, t.Format(time.RFC3339)
		}
		if k.RateLimit > 0 {
			v.Burst = ingest.Burst(k)
			rate = fmt.Sprintf("%g/s burst %d", k.RateLimit, v.Burst)
		}
		views = append(views, v)
		rows = append(rows, []string{strconv.FormatInt(k.ID, 10), k.Name, v.Scope, v.Prefix, rate, v.CreatedAt.Format(time.RFC3339), revoked})
	}
	return writeRecords(c.App.Writer, c.String("format"), []string{"id", "name", "scope", "prefix", "rate_limit", "created_at", "revoked_at"}, rows, views)
}

func keysRevoke(c *cli.Context) error {
	args := positional(c)
	if len(args) != 1 {
		return usageErrorf(c, "want one argument, the key's ID (hookledger keys list shows it)")
	}
	id, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || id < 1 {
		return usageErrorf(c, "key ID %q: want the number hookledger keys list shows", args[0])
	}
	db, err := openWritable(c)
	if err != nil {
		return err
	}
	defer db.Close()
	k, err := db.RevokeAPIKey(c.Context, id, time.Now().UnixMilli())
	switch {
	case errors.Is(err, schema.ErrNotFound):
		return fmt.Errorf("no API key %d (hookledger keys list shows them)", id)
	case errors.Is(err, schema.ErrRevoked):
		return fmt.Errorf("API key %d is already revoked", id)
	case err != nil:
		return err
	}
	fmt.Fprintf(c.App.Writer, "API key %d %q revoked; a running serve refuses it within ingest.key_cache (default %s).\n",
		k.ID, k.Name, config.DefaultKeyCache)
	return nil
}
