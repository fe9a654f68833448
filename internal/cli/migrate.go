package cli

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/durable"
	"github.com/hookledger/hookledger/schema"
)

func migrateCommand() *cli.Command {
	return &cli.Command{
		Name:        "migrate",
		Usage:       "create the database or bring its schema up to date, then exit",
		Description: "serve migrates on start too; run this to upgrade ahead of a deploy. Migrations run in one transaction.",
		Flags:       configFlags(),
		Action: func(c *cli.Context) error {
			dir, path, err := locate(c)
			if err != nil {
				return err
			}
			if !schema.IsPostgres(path) {
				// Not beside a running serve, which migrates on start itself.
				// (On PostgreSQL migrations take a lock of their own.)
				if err := durable.MkdirAll(dir, 0o700); err != nil {
					return fmt.Errorf("create data directory: %w", err)
				}
				lock, err := schema.LockDir(dir)
				if err != nil {
					return err
				}
				defer lock.Unlock()
			}
			db, err := schema.Open(c.Context, path, schema.Options{})
			if err != nil {
				return err
			}
			defer db.Close()
			ms, err := db.Migrations()
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "%s is at schema version %d\n", db.Path, ms[len(ms)-1].Version)
			return nil
		},
	}
}
