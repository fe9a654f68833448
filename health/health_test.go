package health

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/schema"
)

type env struct {
	*testenv.Env
	checker *Checker
	public  *httptest.Server
	admin   *httptest.Server
	logs    *testenv.Buffer
}

// newEnv wires the checks exactly as serve does, on a real database file.
func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{Env: testenv.New(t, testenv.Options{NoServer: true, RealTime: true}), logs: &testenv.Buffer{}}
	e.checker = New(slog.New(slog.NewJSONHandler(e.logs, nil)))
	e.checker.Timeout = 300 * time.Millisecond
	e.checker.CacheFor = 0
	e.checker.Add("database", Writable(e.Writer))
	e.checker.Add("migrations", Migrated(e.DB))
	e.checker.Add("disk", Disk(e.Dir, 0))
	mux := http.NewServeMux()
	e.checker.Routes(mux)
	e.public = httptest.NewServer(mux)
	e.admin = httptest.NewServer(e.checker.DetailHandler())
	t.Cleanup(e.public.Close)
	t.Cleanup(e.admin.Close)
	return e
}

func get(t *testing.T, url string) (int, report, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var rep report
	if strings.HasSuffix(url, "/healthz") {
		return resp.StatusCode, rep, string(body)
	}
	if err := json.Unmarshal(body, &rep); err != nil {
		t.Fatalf("%s: %v: %s", url, err, body)
	}
	return resp.StatusCode, rep, string(body)
}

func TestHealthzAndReady(t *testing.T) {
	e := newEnv(t)
	if code, _, body := get(t, e.public.URL+"/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("healthz: %d %q", code, body)
	}
	code, rep, _ := get(t, e.public.URL+"/readyz")
	if code != 200 || rep.Status != "ready" {
		t.Fatalf("readyz: %d %+v", code, rep)
	}
	for _, name := range []string{"database", "migrations", "disk"} {
		if rep.Checks[name] != "ok" {
			t.Errorf("check %s = %q", name, rep.Checks[name])
		}
	}
	var n int
	if err := e.DB.Read.Get(&n, `SELECT (SELECT COUNT(*) FROM receipts) + (SELECT COUNT(*) FROM metered_usage) + (SELECT COUNT(*) FROM delivery_attempts)`); err != nil || n != 0 {
		t.Fatalf("the write probe left %d rows (err %v)", n, err)
	}
}

// Another process holding the write lock (a sqlite3 shell mid-transaction, a
// stuck backup) makes the database unwritable for the writer: /readyz says so,
// and says ready again once the lock is gone.
func TestReadyzUnreadyWhileDatabaseCannotBeWritten(t *testing.T) {
	testenv.SQLiteOnly(t, "holds SQLite's write lock from a second connection")
	e := newEnv(t)
	if code, _, _ := get(t, e.public.URL+"/readyz"); code != 200 {
		t.Fatalf("readyz before: %d", code)
	}

	other, err := sqlx.Open("sqlite", "file:"+filepath.Join(e.Dir, schema.FileName)+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}

	code, rep, body := get(t, e.public.URL+"/readyz")
	if code != http.StatusServiceUnavailable || rep.Status != "unready" || rep.Checks["database"] != "failing" {
		t.Fatalf("readyz while locked: %d %s", code, body)
	}
	if rep.Checks["migrations"] != "ok" || rep.Checks["disk"] != "ok" {
		t.Errorf("only the database check should fail: %s", body)
	}
	// The public answer names the check, never the error text or a path.
	if strings.Contains(body, e.Dir) || strings.Contains(body, "probe") {
		t.Errorf("public /readyz leaks detail: %s", body)
	}
	_, rep, _ = get(t, e.admin.URL)
	if !strings.Contains(rep.Checks["database"], "write probe timed out") {
		t.Errorf("admin detail: %q", rep.Checks["database"])
	}
	if !strings.Contains(e.logs.String(), `"msg":"readiness check failing","check":"database"`) {
		t.Errorf("no log line for the failing check:\n%s", e.logs)
	}

	if _, err := conn.ExecContext(context.Background(), `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	// The writer's busy timeout is 10 s.
	await.Eventually(t, 15*time.Second, "ready again after the lock was released", func() bool {
		code, _, _ = get(t, e.public.URL+"/readyz")
		return code == 200
	})
	if !strings.Contains(e.logs.String(), `"msg":"readiness check recovered","check":"database"`) {
		t.Errorf("no log line for the recovery:\n%s", e.logs)
	}
	// And the writer really writes again.
	op := &custody.Delivery{Provider: "p", EventID: "evt_after", BodySHA256: []byte{0}, Status: custody.StatusIgnored,
		HandlerVersion: "t", Source: custody.SourceWebhook, ReceivedAt: time.UnixMilli(0)}
	if err := e.Writer.Submit(context.Background(), op); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := e.DB.Read.Get(&n, `SELECT COUNT(*) FROM receipts WHERE event_id = 'evt_after'`); err != nil || n != 1 {
		t.Fatalf("receipt after recovery: %d, %v", n, err)
	}
}

func TestReadyzUnreadyWhenWriterClosed(t *testing.T) {
	e := newEnv(t)
	e.Writer.Close()
	code, _, _ := get(t, e.public.URL+"/readyz")
	if code != http.StatusServiceUnavailable {
		t.Fatalf("readyz with a closed writer: %d", code)
	}
	_, rep, _ := get(t, e.admin.URL)
	if !strings.Contains(rep.Checks["database"], custody.ErrClosed.Error()) {
		t.Errorf("detail: %q", rep.Checks["database"])
	}
}

func TestReadyzMigrations(t *testing.T) {
	e := newEnv(t)
	ms, err := e.DB.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	last := ms[len(ms)-1]
	if _, err := e.DB.Write.Exec(`DELETE FROM schema_migrations WHERE version = ?`, last.Version); err != nil {
		t.Fatal(err)
	}
	code, rep, _ := get(t, e.admin.URL)
	if code != 503 || !strings.Contains(rep.Checks["migrations"], last.Name) {
		t.Fatalf("pending migration: %d %+v", code, rep)
	}
	if _, err := e.DB.Write.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, 0)`, last.Version, last.Name); err != nil {
		t.Fatal(err)
	}
	if code, _, body := get(t, e.public.URL+"/readyz"); code != 200 {
		t.Fatalf("after re-applying: %d %s", code, body)
	}
	// A database migrated by a newer binary is not ours to write.
	if _, err := e.DB.Write.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, '9999_future.sql', 0)`); err != nil {
		t.Fatal(err)
	}
	code, rep, _ = get(t, e.admin.URL)
	if code != 503 || !strings.Contains(rep.Checks["migrations"], "newer binary") {
		t.Fatalf("newer database: %d %+v", code, rep)
	}
}

func TestDiskCheck(t *testing.T) {
	dir := t.TempDir()
	if err := Disk(dir, 0)(context.Background()); err != nil {
		t.Fatalf("real statfs: %v", err)
	}
	if st, err := StatDisk(dir); err == nil && (st.TotalBytes == 0 || st.FreeBytes > st.TotalBytes) {
		t.Errorf("implausible statfs: %+v", st)
	}
	if err := Disk(dir, 1<<62)(context.Background()); err == nil || !strings.Contains(err.Error(), "bytes free") {
		t.Errorf("4 EiB minimum: %v", err)
	}
	if err := Disk(filepath.Join(dir, "missing"), 0)(context.Background()); err == nil {
		t.Error("missing directory passed")
	}

	defer func(f func(string) (DiskStatus, error)) { statDisk = f }(statDisk)
	statDisk = func(string) (DiskStatus, error) { return DiskStatus{FreeBytes: 1 << 40, ReadOnly: true}, nil }
	if err := Disk(dir, 0)(context.Background()); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("read-only filesystem: %v", err)
	}
	statDisk = func(string) (DiskStatus, error) { return DiskStatus{}, ErrDiskUnknown }
	if err := Disk(dir, 1<<62)(context.Background()); err != nil {
		t.Errorf("unknown platform must pass: %v", err)
	}
}

func TestPluggableCheckAndTimeout(t *testing.T) {
	c := New(nil)
	c.Timeout, c.CacheFor = 100*time.Millisecond, 0
	var healthy atomic.Bool
	c.Add("replication", func(ctx context.Context) error {
		if healthy.Load() {
			return nil
		}
		return errors.New("replica unreachable")
	})
	if ok, res := c.Ready(context.Background()); ok || res[0].Name != "replication" || res[0].Err == nil {
		t.Fatalf("failing replication: %v %+v", ok, res)
	}
	healthy.Store(true)
	if ok, _ := c.Ready(context.Background()); !ok {
		t.Fatal("healthy replication: unready")
	}

	block := make(chan struct{})
	defer close(block)
	c.Add("stuck", func(context.Context) error { <-block; return nil }) // ignores ctx
	start := time.Now()
	ok, res := c.Ready(context.Background())
	if ok || !errors.Is(res[1].Err, context.DeadlineExceeded) {
		t.Fatalf("stuck check: %v %+v", ok, res)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("a stuck check held /readyz for %v", d)
	}
}

// /readyz is public: a flood of requests must not become a flood of write
// probes in the writer queue.
func TestReadyzCachesAndCoalesces(t *testing.T) {
	c := New(nil)
	c.CacheFor = time.Hour
	var calls atomic.Int32
	c.Add("slow", func(ctx context.Context) error {
		calls.Add(1)
		time.Sleep(50 * time.Millisecond)
		return nil
	})
	mux := http.NewServeMux()
	c.Routes(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			resp, err := http.Get(srv.URL + "/readyz")
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("status %d", resp.StatusCode)
			}
		})
	}
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Errorf("50 requests ran the check %d times, want 1", n)
	}
}

// An advisory check (replication in the default durability mode) shows its
// error in the detail and "failing" on /readyz, but the instance stays ready.
func TestAdvisoryCheckReportsButStaysReady(t *testing.T) {
	e := newEnv(t)
	e.checker.AddAdvisory("replication", func(context.Context) error {
		return errors.New("replica file:/r: open /r/ltx/0: not a directory")
	})
	code, rep, _ := get(t, e.public.URL+"/readyz")
	if code != 200 || rep.Status != "ready" || rep.Checks["replication"] != "failing" {
		t.Errorf("public /readyz with an advisory check failing: %d %+v; want 200, ready, replication failing", code, rep)
	}
	code, rep, _ = get(t, e.admin.URL)
	if code != 200 || !strings.Contains(rep.Checks["replication"], "not a directory") {
		t.Errorf("detail with an advisory check failing: %d %+v; want 200 and the error", code, rep)
	}
}
