// Package schema is hookledger's storage backend: it opens the database (a
// SQLite file, the embedded default, or PostgreSQL for several receivers:
// postgres.go), keeps its schema current and holds every SQL statement.
package schema

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver; Litestream uses the same one

	"github.com/hookledger/hookledger/durable"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// FileName is the database file inside the data directory.
const FileName = "hookledger.db"

// Options tune how the database is opened.
type Options struct {
	// NoAutoCheckpoint disables SQLite's automatic WAL checkpoints. Litestream
	// must own checkpointing while it replicates, or frames can be checkpointed
	// away before it has copied them.
	NoAutoCheckpoint bool
	// ReadOnly opens only the read pool and skips migrations (for inspecting a
	// database another process is writing, or a restored copy). It never
	// creates a file or directory: a missing database is ErrNoDatabase.
	ReadOnly bool
	// MustExist opens an existing database for writing (and migrates it) but
	// refuses to create one: a missing database is ErrNoDatabase.
	MustExist bool
	// Standby (PostgreSQL only) makes every commit wait until a synchronous
	// standby has applied it (synchronous_commit = remote_apply): the
	// durability: replica of a PostgreSQL database. A server with no
	// synchronous standby configured is refused.
	Standby bool
}

// ErrNoDatabase is returned by Open with ReadOnly or MustExist when there is
// no database at the path.
var ErrNoDatabase = errors.New("no database")

// DB holds the two handles hookledger uses. WAL lets the read pool run beside
// the single writer, so queries never wait for a commit and vice versa.
type DB struct {
	// Path is the SQLite file, or the PostgreSQL database's URL without its
	// password.
	Path string
	// Write has exactly one connection: every write goes through one writer,
	// and BEGIN is always IMMEDIATE so a transaction never has to upgrade its lock.
	Write *sqlx.DB
	// Read is a pool of query-only connections.
	Read *sqlx.DB
	// hot runs, on Read, the reads serve makes thousands of times a second,
	// each prepared once (prepared.go).
	hot *prepared
	// registry counts the writes of this handle to what the writer reads
	// but never writes (plan assignments, limit and spend overrides): the
	// writer's caches forget them when it moves (Batch.DataVersion).
	// SQLite's data_version cannot tell: these writes commit on the
	// writer's own connection.
	registry atomic.Int64
	// claims counts this handle's claims of outbox messages (ClaimOutbox,
	// ClaimProbe), bumped before they commit: a claim closes an open
	// Stripe push, and the writer's cache of the pushes it may still add
	// to forgets them when the count moves (Batch.Claims).
	claims atomic.Int64

	backend backend
}

// backend is the database engine behind a DB.
type backend int

const (
	backendSQLite backend = iota
	backendPostgres
)

// Postgres reports whether the database is PostgreSQL's (else SQLite's).
func (db *DB) Postgres() bool { return db.backend == backendPostgres }

// Path returns the database path inside dataDir.
func Path(dataDir string) string { return filepath.Join(dataDir, FileName) }

// Open opens (creating if needed, unless ReadOnly or MustExist) the database
// at path and applies pending migrations. A postgres:// URL (IsPostgres)
// opens that PostgreSQL database instead; it must exist on the server, and
// is migrated unless ReadOnly (MustExist: only if hookledger migrated it
// before).
func Open(ctx context.Context, path string, opts Options) (*DB, error) {
	if IsPostgres(path) {
		return openPostgres(ctx, path, opts)
	}
	mode := "mode=rwc"
	if opts.ReadOnly || opts.MustExist {
		// mode=rw/ro make SQLite itself refuse to create the file; the Stat
		// gives the error a clear name.
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w at %s", ErrNoDatabase, path)
		} else if err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		mode = "mode=rw"
	} else if dir := filepath.Dir(path); dir != "" {
		if err := durable.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create data directory: %w", err)
		}
	}
	db := &DB{Path: path}
	if !opts.ReadOnly {
		if err := makePrivate(path, mode == "mode=rwc"); err != nil {
			return nil, err
		}
		// temp_store(memory): savepoints (the writer's fallback when an op
		// fails) and statement journals copy every page they change; on disk
		// that sub-journal costs a pwrite per page once past 64 KiB. It is
		// never read after its transaction, so durability is unchanged. In the
		// DSN, a reconnected handle keeps it.
		pragmas := []string{"journal_mode(wal)", "synchronous(full)", "busy_timeout(10000)", "foreign_keys(on)", "temp_store(memory)"}
		if opts.NoAutoCheckpoint {
			pragmas = append(pragmas, "wal_autocheckpoint(0)")
		}
		w, err := sqlx.Open("sqlite", dsn(path, pragmas, mode, "_txlock=immediate"))
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		w.SetMaxOpenConns(1)
		w.SetConnMaxLifetime(0)
		w.SetConnMaxIdleTime(0)
		db.Write = w
		if err := migrate(ctx, w); err != nil {
			w.Close()
			return nil, fmt.Errorf("migrate %s: %w", path, err)
		}
	}
	r, err := openRead(ctx, path, opts.ReadOnly)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.Read, db.hot = r, newPrepared(r)
	return db, nil
}

// sqliteReadonlyDirectory is SQLITE_READONLY_DIRECTORY: a WAL database whose
// -shm does not exist and cannot be created, because the directory is read-only.
const sqliteReadonlyDirectory = 1544

// openRead opens the query-only pool. A read-only open (mode=ro) must also
// work in a read-only data directory (a backup, another user's files): with a
// live -wal and -shm SQLite reads them as they are; with none (the database
// was closed cleanly, so every commit is in the main file) it cannot create
// the -shm, and immutable=1 reads the main file without one. immutable is
// never used while a -wal exists: it would ignore the commits in it.
func openRead(ctx context.Context, path string, readOnly bool) (*sqlx.DB, error) {
	pragmas := []string{"busy_timeout(10000)", "query_only(on)"}
	mode := []string{}
	if readOnly {
		mode = append(mode, "mode=ro")
	}
	r, err := pingRead(ctx, dsn(path, pragmas, mode...))
	var coded interface{ Code() int }
	if readOnly && errors.As(err, &coded) && coded.Code() == sqliteReadonlyDirectory {
		if _, serr := os.Stat(path + "-wal"); errors.Is(serr, fs.ErrNotExist) {
			return pingRead(ctx, dsn(path, pragmas, "mode=ro", "immutable=1"))
		}
	}
	return r, err
}

// readConns is the size of the read pool, every connection of which is kept
// open once opened. database/sql keeps 2 idle by default: under more than 2
// concurrent reads it closed the others after each read and opened new ones,
// each reading the schema and preparing its statements anew (at 2,000
// entitlement checks a second, most of serve's CPU).
const readConns = 8

func pingRead(ctx context.Context, dsn string) (*sqlx.DB, error) {
	r, err := sqlx.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	r.SetMaxOpenConns(readConns)
	r.SetMaxIdleConns(readConns)
	if err := r.PingContext(ctx); err != nil {
		r.Close()
		return nil, err
	}
	// Ping may not touch the WAL index; the first read does.
	if _, err := r.ExecContext(ctx, `SELECT 1 FROM sqlite_schema LIMIT 1`); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// makePrivate creates the database file 0600 before SQLite does (SQLite
// would make it 0644 less the umask, and gives -wal and -shm the mode of the
// database file), and tightens a database, -wal and -shm that an older
// version left readable by others: they hold raw webhook bodies, and
// Litestream copies the database's mode onto every replica file it writes.
// Only the owner can chmod, so a database owned by someone else fails here
// loudly rather than staying exposed.
func makePrivate(path string, create bool) error {
	if create {
		_, statErr := os.Stat(path)
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return fmt.Errorf("open %s: %w", path, err)
		}
		f.Close()
		// A new database's name is durable before anything is acknowledged
		// from it (SQLite fsyncs the directory for its -wal, not for the
		// database file).
		if errors.Is(statErr, fs.ErrNotExist) {
			if err := durable.SyncDir(filepath.Dir(path)); err != nil {
				return fmt.Errorf("create %s: %w", path, err)
			}
		}
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return fmt.Errorf("open %s: %w", path, err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(p, 0o600); err != nil {
				return fmt.Errorf("make %s private (mode %v): %w", p, fi.Mode().Perm(), err)
			}
		}
	}
	return nil
}

// FilePool is a pool on a database file, as ReadOnlyPool opens it.
type FilePool = sql.DB

// ReadOnlyPool is a read-only pool on the SQLite file at path, opened
// lazily (the file may not exist yet) and never migrated: what a test that
// runs the binary reads the binary's database through while it runs. It is
// here so no package but schema holds a database driver.
func ReadOnlyPool(path string) (*FilePool, error) {
	return sql.Open("sqlite", dsn(path, []string{"busy_timeout(5000)"}, "mode=ro"))
}

func dsn(path string, pragmas []string, extra ...string) string {
	q := make([]string, 0, len(pragmas)+len(extra))
	for _, p := range pragmas {
		q = append(q, "_pragma="+url.QueryEscape(p))
	}
	q = append(q, extra...)
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + strings.Join(q, "&")
}

// Close closes both handles. With Litestream running, close the DB first.
func (db *DB) Close() error {
	var first error
	if db.hot != nil {
		first = db.hot.close()
	}
	for _, h := range []*sqlx.DB{db.Read, db.Write} {
		if h == nil {
			continue
		}
		if err := h.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Migration is one embedded SQL file.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Migrations returns SQLite's embedded migrations in version order.
func Migrations() ([]Migration, error) { return migrationsIn(migrationFiles, "migrations") }

// Migrations returns the embedded migrations of db's engine in version order.
func (db *DB) Migrations() ([]Migration, error) {
	if db.Postgres() {
		return migrationsIn(postgresMigrationFiles, "migrations/postgres")
	}
	return Migrations()
}

func migrationsIn(fsys embed.FS, dir string) ([]Migration, error) {
	names, err := fs.Glob(fsys, dir+"/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var ms []Migration
	for _, n := range names {
		base := filepath.Base(n)
		v, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("migration %s: name must start with a number", base)
		}
		b, err := fsys.ReadFile(n)
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: base, SQL: string(b)})
	}
	return ms, nil
}

// Pending reports SQLite's migrations not yet applied to db.
func Pending(ctx context.Context, db sqlx.QueryerContext) ([]Migration, error) {
	ms, err := Migrations()
	if err != nil {
		return nil, err
	}
	return pending(ctx, db, ms)
}

// pending reports the migrations of ms not yet applied to db.
func pending(ctx context.Context, db sqlx.QueryerContext, ms []Migration) ([]Migration, error) {
	if ok, err := migrationsTable(ctx, db); err != nil {
		return nil, err
	} else if !ok {
		return ms, nil // never migrated
	}
	var applied []int
	if err := sqlx.SelectContext(ctx, db, &applied, `SELECT version FROM schema_migrations`); err != nil {
		return nil, err
	}
	done := make(map[int]bool, len(applied))
	for _, v := range applied {
		done[v] = true
	}
	var pending []Migration
	for _, m := range ms {
		if !done[m.Version] {
			pending = append(pending, m)
		}
	}
	return pending, nil
}

// migrate applies every pending migration in one transaction, so a database is
// never left half-migrated. Foreign keys are off while it runs, as SQLite's
// table-rebuild procedure requires (dropping a rebuilt parent table would
// otherwise cascade into its children), and foreign_key_check must come back
// empty before the transaction commits.
func migrate(ctx context.Context, db *sqlx.DB) (err error) {
	conn, err := db.Connx(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// foreign_keys cannot change inside a transaction: set it around one.
	if _, err := conn.ExecContext(ctx, `PRAGMA foreign_keys = OFF`); err != nil {
		return err
	}
	defer func() {
		if _, ferr := conn.ExecContext(ctx, `PRAGMA foreign_keys = ON`); ferr != nil && err == nil {
			err = ferr
		}
	}()
	tx, err := conn.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL)`); err != nil {
		return err
	}
	pending, err := Pending(ctx, tx)
	if err != nil {
		return err
	}
	for _, m := range pending {
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("%s: %w", m.Name, err)
		}
		if step := migrationSteps[m.Version]; step != nil {
			if err := step(ctx, tx); err != nil {
				return fmt.Errorf("%s: %w", m.Name, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.Version, m.Name, time.Now().UnixMilli()); err != nil {
			return err
		}
	}
	if len(pending) > 0 {
		var violations []struct {
			Table  string        `db:"table"`
			RowID  sql.NullInt64 `db:"rowid"`
			Parent string        `db:"parent"`
			FKID   int           `db:"fkid"`
		}
		if err := tx.SelectContext(ctx, &violations, `PRAGMA foreign_key_check`); err != nil {
			return fmt.Errorf("foreign_key_check: %w", err)
		}
		if len(violations) > 0 {
			v := violations[0]
			row := "a WITHOUT ROWID row"
			if v.RowID.Valid {
				row = fmt.Sprintf("rowid %d", v.RowID.Int64)
			}
			return fmt.Errorf("foreign_key_check: %d rows violate a foreign key, the first in %s (%s) -> %s; "+
				"nothing was migrated: `sqlite3 DB 'PRAGMA foreign_key_check'` lists them, repair or remove them and start again",
				len(violations), v.Table, row, v.Parent)
		}
	}
	return tx.Commit()
}

// equal tests a column for equality with a value; an empty value matches
// every row.
type equal struct{ column, value string }

// whereEqual is the WHERE clause of tests (with its leading space, or ""
// when every value is empty) and its arguments. A test with an empty value
// is left out, rather than written as an OR of the column's test and a test
// of the parameter against the empty string: SQLite prepares a statement
// before it sees the parameters, so it plans that OR, for any value, as a
// scan of the whole table (the entitlement check read every plan assignment
// and limit override there was, for every check).
func whereEqual(tests ...equal) (string, []any) {
	var conds []string
	var args []any
	for _, t := range tests {
		if t.value != "" {
			conds, args = append(conds, t.column+" = ?"), append(args, t.value)
		}
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}
