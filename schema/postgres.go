package schema

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"
)

// The PostgreSQL backend: the same DB, the same methods and the same SQL as
// SQLite's, on a server several receivers share. Where the two engines
// differ, the difference is here or behind db.postgres():
//
//   - Placeholders: schema's SQL is written with '?', which SQLite takes;
//     each PostgreSQL connection rewrites a statement's '?' to $1, $2, …
//     (sqlx.Rebind) before pgx sees it, so no query is written twice.
//     Schema's SQL has no '?' inside a literal or a comment.
//   - Migrations: migrations/postgres/, whose history starts at version 6
//     (the whole schema as SQLite had it then); later versions share their
//     numbers with SQLite's.
//   - Locks: SQLite's single writer and BEGIN IMMEDIATE become a row lock on
//     chain_head (SELECT … FOR UPDATE) that a write batch or an invoice close
//     takes first: batches of several receivers interleave, rows never do.
//   - Durability: synchronous_commit is forced on for every session, and a
//     server with fsync off is refused.
//   - Snapshots: a read transaction is REPEATABLE READ, one snapshot for all
//     its statements, as SQLite's WAL read transaction is.

//go:embed migrations/postgres/*.sql
var postgresMigrationFiles embed.FS

// IsPostgres reports whether target names a PostgreSQL database (a
// postgres:// or postgresql:// URL) rather than a SQLite file.
func IsPostgres(target string) bool {
	return strings.HasPrefix(target, "postgres://") || strings.HasPrefix(target, "postgresql://")
}

// pgDriverName makes sqlx treat the handles as PostgreSQL's.
const pgDriverName = "pgx"

func openPostgres(ctx context.Context, dsn string, opts Options) (*DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", redact(err))
	}
	// Every commit waits for the server's WAL flush: a 2xx follows a
	// durable commit whatever the server's default says.
	cfg.RuntimeParams["synchronous_commit"] = "on"
	if opts.Standby {
		cfg.RuntimeParams["synchronous_commit"] = "remote_apply"
	}
	cfg.RuntimeParams["application_name"] = "hookledger"
	db := &DB{Path: displayDSN(cfg), backend: backendPostgres}

	open := func(maxConns int) (*sqlx.DB, error) {
		h := sqlx.NewDb(sql.OpenDB(rebindConnector{stdlib.GetConnector(*cfg)}), pgDriverName)
		h.SetMaxOpenConns(maxConns)
		h.SetMaxIdleConns(maxConns) // see readConns
		if err := h.PingContext(ctx); err != nil {
			h.Close()
			return nil, fmt.Errorf("connect to %s: %w", db.Path, err)
		}
		return h, nil
	}
	r, err := open(8)
	if err != nil {
		return nil, err
	}
	db.Read, db.hot = r, newPrepared(r)
	if err := checkDurable(ctx, r, opts.Standby); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", db.Path, err)
	}
	if opts.ReadOnly {
		return db, nil
	}
	w, err := open(1)
	if err != nil {
		db.Close()
		return nil, err
	}
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	db.Write = w
	if opts.MustExist {
		if ok, err := migrationsTable(ctx, w); err != nil {
			db.Close()
			return nil, err
		} else if !ok {
			db.Close()
			return nil, fmt.Errorf("%w at %s (the database exists but hookledger has never migrated it)", ErrNoDatabase, db.Path)
		}
	}
	if err := migratePostgres(ctx, w); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate %s: %w", db.Path, err)
	}
	return db, nil
}

// checkDurable refuses a server that would acknowledge a commit it has not
// written: with fsync off a crash loses committed transactions.
func checkDurable(ctx context.Context, q sqlx.QueryerContext, standby bool) error {
	var fsync, sync, standbys string
	if err := q.QueryRowxContext(ctx, `SELECT current_setting('fsync'), current_setting('synchronous_commit'),
		current_setting('synchronous_standby_names')`).Scan(&fsync, &sync, &standbys); err != nil {
		return err
	}
	if fsync != "on" {
		return errors.New("the server runs with fsync = off, so a commit it acknowledges can be lost: hookledger refuses it")
	}
	want := "on"
	if standby {
		want = "remote_apply"
	}
	if sync != want {
		return fmt.Errorf("synchronous_commit is %q for hookledger's session, want %s", sync, want)
	}
	if standby && strings.TrimSpace(standbys) == "" {
		return errors.New("durability: replica waits for a synchronous standby, but the server has none " +
			"(synchronous_standby_names is empty, so commits would not wait): configure one, or use durability: local")
	}
	return nil
}

// displayDSN names the database without its password, for logs and errors.
func displayDSN(cfg *pgx.ConnConfig) string {
	host := cfg.Host
	if !strings.HasPrefix(host, "/") {
		host = net.JoinHostPort(host, strconv.Itoa(int(cfg.Port)))
	}
	user := ""
	if cfg.User != "" {
		user = cfg.User + "@"
	}
	return "postgres://" + user + host + "/" + cfg.Database
}

// redact keeps a DSN's password out of an error pgx made from it.
func redact(err error) error {
	var perr *pgconn.ParseConfigError
	if errors.As(err, &perr) {
		return errors.New("cannot parse the database URL (check its syntax; the URL is not repeated here because it may hold a password)")
	}
	return err
}

// rebindConnector hands out connections that rewrite '?' placeholders.
type rebindConnector struct{ driver.Connector }

func (c rebindConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return rebindConn{conn.(*stdlib.Conn)}, nil
}

// rebindConn is pgx's database/sql connection with every statement's '?'
// placeholders numbered for PostgreSQL.
type rebindConn struct{ *stdlib.Conn }

func (c rebindConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.PrepareContext(ctx, sqlx.Rebind(sqlx.DOLLAR, query))
}

func (c rebindConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return c.Conn.ExecContext(ctx, sqlx.Rebind(sqlx.DOLLAR, query), args)
}

func (c rebindConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.QueryContext(ctx, sqlx.Rebind(sqlx.DOLLAR, query), args)
}

// migratePostgres applies every pending migration in one transaction. An
// advisory lock makes receivers that start together migrate one at a time:
// the second finds nothing pending.
func migratePostgres(ctx context.Context, db *sqlx.DB) error {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7243599)`); err != nil { // any constant of ours
		return err
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    BIGINT PRIMARY KEY,
		name       TEXT   NOT NULL,
		applied_at BIGINT NOT NULL)`); err != nil {
		return err
	}
	ms, err := migrationsIn(postgresMigrationFiles, "migrations/postgres")
	if err != nil {
		return err
	}
	todo, err := pending(ctx, tx, ms)
	if err != nil {
		return err
	}
	for _, m := range todo {
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("%s: %w", m.Name, err)
		}
		if step := postgresMigrationSteps[m.Version]; step != nil {
			if err := step(ctx, tx); err != nil {
				return fmt.Errorf("%s: %w", m.Name, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.Version, m.Name, time.Now().UnixMilli()); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// ErrIntegritySkipped means IntegrityCheck could not run the database's own
// page and index checks: on PostgreSQL amcheck is missing from the database
// or its role may not execute amcheck's functions. The error says which and
// how to allow them; every other check of verify still runs.
var ErrIntegritySkipped = errors.New("the page and index checks were skipped")

// postgresIntegrityCheck is PostgreSQL's counterpart of integrity_check:
// amcheck's verify_heapam over each of hookledger's tables and bt_index_check
// (with every heap tuple looked up) over each of their btree indexes; ["ok"]
// when none reports corruption. amcheck ships with PostgreSQL, but only a
// superuser can create it in the database, and its functions are not
// granted to other roles: a non-superuser owner, as docs/postgres.md sets
// one up, needs both done once for it. Without them the check is skipped
// (ErrIntegritySkipped, saying why) rather than passed or failed: it is the
// database's health, not the ledger's, and the ledger's own checks need none
// of it. Corruption found before a refusal is still returned.
func postgresIntegrityCheck(ctx context.Context, db *sqlx.DB) ([]string, error) {
	var installed bool
	if err := db.GetContext(ctx, &installed, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'amcheck')`); err != nil {
		return nil, err
	}
	if !installed {
		if _, err := db.ExecContext(ctx, `CREATE EXTENSION IF NOT EXISTS amcheck`); err != nil {
			return nil, fmt.Errorf("%w: amcheck is not installed in this database and this role cannot install it "+
				"(a superuser can: CREATE EXTENSION amcheck, then GRANT EXECUTE on verify_heapam and bt_index_check; see docs/postgres.md): %v",
				ErrIntegritySkipped, err)
		}
	}
	denied := func(fn string, err error) error {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege
			return fmt.Errorf("%w: this role may not run amcheck's %s (a superuser can GRANT EXECUTE on verify_heapam and "+
				"bt_index_check to it; see docs/postgres.md): %v", ErrIntegritySkipped, fn, err)
		}
		return nil
	}
	var msgs []string
	err := db.SelectContext(ctx, &msgs, `SELECT c.relname || ': block ' || v.blkno || ': ' || v.msg
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace, LATERAL verify_heapam(c.oid) v
		WHERE n.nspname = current_schema() AND c.relkind = 'r'`)
	if err != nil {
		if skip := denied("verify_heapam", err); skip != nil {
			return nil, skip
		}
		return nil, fmt.Errorf("verify_heapam: %w", err)
	}
	var indexes []string
	if err := db.SelectContext(ctx, &indexes, `SELECT c.relname FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = current_schema() AND am.amname = 'btree' ORDER BY c.relname`); err != nil {
		return nil, err
	}
	for _, ix := range indexes {
		if _, err := db.ExecContext(ctx, `SELECT bt_index_check(?::regclass, true)`, ix); err != nil {
			if skip := denied("bt_index_check", err); skip != nil {
				return msgs, skip
			}
			msgs = append(msgs, ix+": "+err.Error())
		}
	}
	if len(msgs) == 0 {
		msgs = []string{"ok"}
	}
	return msgs, nil
}

// CreatePostgresDatabase creates database name on the server serverDSN
// points at (connecting to the database it names, often "postgres"), and
// returns the URL of the new database. Tests use it for a fresh database
// each; name must be a plain identifier.
func CreatePostgresDatabase(ctx context.Context, serverDSN, name string) (string, error) {
	return createPostgresDatabase(ctx, serverDSN, name, "")
}

// CopyPostgresDatabase creates database name as a copy of database template
// on the same server (CREATE DATABASE … TEMPLATE: a file copy, with every
// table, index, row and statistic; nothing may be connected to template
// meanwhile), and returns the new database's URL. The benchmarks copy a
// pre-filled ledger for each run with it. On PostgreSQL 15 and later the
// copy is made with STRATEGY FILE_COPY: the files are copied and the copy
// checkpointed, where the default strategy writes every page of a large
// template to the WAL as well.
func CopyPostgresDatabase(ctx context.Context, serverDSN, name, template string) (string, error) {
	if !plainIdentifier(template) {
		return "", fmt.Errorf("database name %q: use lowercase letters, digits and _", template)
	}
	return createPostgresDatabase(ctx, serverDSN, name, template)
}

func createPostgresDatabase(ctx context.Context, serverDSN, name, template string) (string, error) {
	if !plainIdentifier(name) {
		return "", fmt.Errorf("database name %q: use lowercase letters, digits and _", name)
	}
	cfg, err := pgx.ParseConfig(serverDSN)
	if err != nil {
		return "", redact(err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", fmt.Errorf("connect to %s: %w", displayDSN(cfg), err)
	}
	defer conn.Close(ctx)
	create := `CREATE DATABASE ` + name + ` TEMPLATE template0 ENCODING 'UTF8'`
	if template != "" {
		create = `CREATE DATABASE ` + name + ` TEMPLATE ` + template
		var version int
		if err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
			return "", err
		}
		if version >= 150000 {
			create += ` STRATEGY FILE_COPY`
		}
	}
	if _, err := conn.Exec(ctx, create); err != nil {
		return "", err
	}
	return postgresDatabaseURL(serverDSN, name)
}

// postgresDatabaseURL is serverDSN naming database name instead.
func postgresDatabaseURL(serverDSN, name string) (string, error) {
	u, err := url.Parse(serverDSN)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

// PostgresDatabaseNote reads the comment on database name (COMMENT ON
// DATABASE); ok is false when the database does not exist. The benchmarks
// mark a finished pre-fill with it, so that a later run reuses it.
func PostgresDatabaseNote(ctx context.Context, serverDSN, name string) (note string, ok bool, err error) {
	conn, err := pgx.Connect(ctx, serverDSN)
	if err != nil {
		return "", false, redact(err)
	}
	defer conn.Close(ctx)
	var n *string
	err = conn.QueryRow(ctx, `SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1`, name).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil || n == nil {
		return "", err == nil, err
	}
	return *n, true, nil
}

// SetPostgresDatabaseNote sets the comment on database name.
func SetPostgresDatabaseNote(ctx context.Context, serverDSN, name, note string) error {
	if !plainIdentifier(name) {
		return fmt.Errorf("database name %q: use lowercase letters, digits and _", name)
	}
	conn, err := pgx.Connect(ctx, serverDSN)
	if err != nil {
		return redact(err)
	}
	defer conn.Close(ctx)
	// COMMENT takes a literal, not a parameter; the server's strings are
	// standard-conforming (backslashes are plain), so doubling quotes quotes.
	_, err = conn.Exec(ctx, `COMMENT ON DATABASE `+name+` IS '`+strings.ReplaceAll(note, "'", "''")+`'`)
	return err
}

// VacuumAnalyze runs VACUUM (ANALYZE) over the whole PostgreSQL database:
// the bench pre-fill leaves its ledger with statistics and a visibility map,
// so every copy of it (CopyPostgresDatabase) starts settled rather than
// with autovacuum's first pass over it running during the measured load.
// Nothing on SQLite.
func (db *DB) VacuumAnalyze(ctx context.Context) error {
	if !db.Postgres() {
		return nil
	}
	if db.Write == nil {
		return errors.New("schema: the database is open read-only")
	}
	_, err := db.Write.ExecContext(ctx, `VACUUM (ANALYZE)`)
	return err
}

// DropPostgresDatabase drops database name, closing its connections.
func DropPostgresDatabase(ctx context.Context, serverDSN, name string) error {
	if !plainIdentifier(name) {
		return fmt.Errorf("database name %q: use lowercase letters, digits and _", name)
	}
	conn, err := pgx.Connect(ctx, serverDSN)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`)
	return err
}

func plainIdentifier(s string) bool {
	for i, r := range s {
		if !(r >= 'a' && r <= 'z' || r == '_' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != "" && len(s) <= 63
}
