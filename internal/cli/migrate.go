package cli

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/schema"
)

func migrateCommand() *cli.Command {
	return &cli.Command{
		Name:        "migrate",
		Usage:       "create the database or bring its schema up to date, then exit",
		Description: "serve migrates on start too; run this to upgrade ahead of a deploy. Migrations run in one transaction.",
		Flags:       configFlags(),
		Action: func(c *cli.Context) error {
			dir, err := dataDir(c)
			if err != nil {
				return err
			}
			// Not beside a running serve, which migrates on start itself.
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return fmt.Errorf("create data directory: %w", err)
			}
			lock, err := schema.LockDir(dir)
			if err != nil {
				return err
			}
			defer lock.Unlock()
			path := schema.Path(dir)
			db, err := schema.Open(c.Context, path, schema.Options{})
			if err != nil {
				return err
			}
			defer db.Close()
			ms, err := schema.Migrations()
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "%s is at schema version %d\n", path, ms[len(ms)-1].Version)
			return nil
		},
	}
}
