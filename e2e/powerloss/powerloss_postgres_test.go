package powerloss_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookledger/hookledger/durable"
	"github.com/hookledger/hookledger/internal/powerloss"
	"github.com/hookledger/hookledger/internal/testenv"
)

// pgOnDisk is a PostgreSQL server of its own whose data directory is on the
// power-loss disk, run as the postgres user in its own process group (a cut
// kills every backend at once, as the power would).
type pgOnDisk struct {
	t      *testing.T
	bin    string // the directory of initdb and postgres
	data   string
	socket string
	port   int
	url    string
	cred   *syscall.Credential
	cmd    *exec.Cmd
	log    *testenv.Buffer
}

func newPGOnDisk(t *testing.T, disk *powerloss.Disk) *pgOnDisk {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(bins) == 0 {
		testenv.NeedService(t, "PostgreSQL's server binaries (/usr/lib/postgresql/*/bin)", fmt.Errorf("none installed"))
	}
	sort.Slice(bins, func(i, j int) bool { return pgMajor(bins[i]) < pgMajor(bins[j]) })
	u, err := user.Lookup("postgres")
	if err != nil {
		testenv.NeedService(t, "the postgres user", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	p := &pgOnDisk{
		t: t, bin: filepath.Dir(bins[len(bins)-1]), data: filepath.Join(disk.Dir, "pgdata"), socket: t.TempDir(),
		cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)},
	}
	// The postgres user must reach the mount (t.TempDir's directories are 0700).
	for dir := filepath.Dir(disk.Dir); dir != os.TempDir() && dir != "/"; dir = filepath.Dir(dir) {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(p.socket, 0o777); err != nil {
		t.Fatal(err)
	}
	addr := testenv.FreeAddr(t)
	if p.port, err = strconv.Atoi(addr[strings.LastIndex(addr, ":")+1:]); err != nil {
		t.Fatal(err)
	}
	p.url = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.port)
	initdb := exec.Command(filepath.Join(p.bin, "initdb"), "-A", "trust", "-U", "postgres", "-D", p.data, "--no-instructions")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	initdb.Dir = p.socket
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb on the power-loss disk: %v\n%s", err, out)
	}
	// initdb fsyncs everything inside the data directory but not the
	// directory holding it: under strict rules a cut would take the whole
	// cluster. Provisioning's part, not what the test is about.
	if err := durable.SyncDir(disk.Dir); err != nil {
		t.Fatal(err)
	}
	p.start()
	t.Cleanup(p.kill)
	return p
}

func pgMajor(bin string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(bin))))
	return n
}

// start runs the server (after a cut: its crash recovery) and waits until
// it takes connections.
func (p *pgOnDisk) start() {
	p.t.Helper()
	p.log = &testenv.Buffer{}
	p.cmd = exec.Command(filepath.Join(p.bin, "postgres"), "-D", p.data, "-p", strconv.Itoa(p.port), "-k", p.socket,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=on", "-c", "full_page_writes=on", "-c", "shared_buffers=16MB")
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred, Setpgid: true}
	p.cmd.Dir = p.socket
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, p.url)
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return
		}
	}
	p.t.Fatalf("PostgreSQL on the power-loss disk did not start:\n%s", p.log)
}

// kill kills the server and every backend (kill -9 of the process group).
func (p *pgOnDisk) kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	p.cmd.Wait()
	// Backends leave with the group; wait until none holds the mount.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if syscall.Kill(-p.cmd.Process.Pid, 0) != nil {
			break
		}
	}
	p.cmd = nil
}

// TestPowerLossPostgres is the torture test with PostgreSQL's data
// directory on the power-loss disk (strict: names need their directory
// fsynced, which PostgreSQL does): at each cut serve and every PostgreSQL
// process are killed, the disk loses what was not fsynced, PostgreSQL
// recovers from its WAL, and every acknowledged event is there exactly
// once, owed or delivered to the app, and verify (with amcheck) is clean.
func TestPowerLossPostgres(t *testing.T) {
	r := newCutRig(t, powerloss.Strict, false, false)
	r.pg = newPGOnDisk(t, r.disk)
	cfg, err := os.ReadFile(filepath.Join(r.work, "hookledger.yml"))
	if err != nil {
		t.Fatal(err)
	}
	r.write("hookledger.yml", strings.Replace(string(cfg), "data: "+r.data, "database: "+r.pg.url, 1))
	cuts := cutsFromEnv(t, 2)
	failed, _ := r.torture(cuts, []powerloss.Cut{powerloss.DropAll, powerloss.KeepSome})
	for i, p := range failed {
		if len(p) > 0 {
			t.Fatalf("cut %d of %d lost or broke something:\n%s\nserve's log:\n%s\nPostgreSQL's log:\n%s", i, cuts, strings.Join(p, "\n"), r.stderr, r.pg.log)
		}
	}
	t.Logf("summary: mode=postgres cuts=%d acknowledged=%d lost=0", cuts, r.ackedCount())
}
