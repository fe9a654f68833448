package cli

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/ledger"
)

// tzFlag is --tz of a command that reads periods or local times. Unset, the
// zone is the configuration's invoicing.tz (zoneOf): a manual close, a usage
// query or a correction reads months as serve's scheduled closes do, so no
// hour falls between a month closed in one zone and the next closed in
// another.
func tzFlag(usage string) cli.Flag {
	return &cli.StringFlag{Name: "tz", EnvVars: []string{"HOOKLEDGER_TZ"}, Usage: usage,
		DefaultText: "invoicing.tz in the configuration, else UTC"}
}

// zoneOf is the zone a command reads periods in: --tz when given, else
// cfg's invoicing.tz, else UTC.
func zoneOf(c *cli.Context, cfg *config.Config) (*time.Location, error) {
	name := c.String("tz")
	if !c.IsSet("tz") && cfg != nil {
		name = cfg.Invoicing.TZ
	}
	loc, err := ledger.LoadZone(name)
	if err != nil {
		if c.IsSet("tz") {
			return nil, fmt.Errorf("--tz: %w", err)
		}
		return nil, fmt.Errorf("invoicing.tz: %w", err)
	}
	return loc, nil
}
