package powerloss

import (
	"bufio"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

// The writer process: the test binary runs again as a SQLite writer that
// commits one row per transaction and prints each id once its COMMIT has
// returned (the acknowledgement), until it is killed.
const writerEnv = "POWERLOSS_SQLITE_WRITER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(writerEnv); spec != "" {
		writeRows(spec)
		return
	}
	os.Exit(m.Run())
}

func writeRows(spec string) {
	var path, sync string
	if _, err := fmt.Sscanf(spec, "%s %s", &path, &sync); err != nil {
		panic(err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(wal)&_pragma=synchronous("+sync+")")
	if err != nil {
		panic(err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS acked (id INTEGER PRIMARY KEY, body BLOB)`); err != nil {
		panic(err)
	}
	out := bufio.NewWriter(os.Stdout)
	for id := 1; ; id++ {
		if _, err := db.Exec(`INSERT INTO acked (id, body) VALUES (?, randomblob(300))`, id); err != nil {
			panic(err)
		}
		fmt.Fprintln(out, id)
		out.Flush()
	}
}

// TestSQLiteLosesAckedRowsWithoutFullSync shows the filesystem can fail a
// durability test that kill -9 passes: SQLite (the driver hookledger uses,
// in WAL mode) with synchronous=OFF or NORMAL loses committed rows at a
// power cut, with FULL it loses none. Each cut kills the writer once it has
// acknowledged some rows, cuts the power (dropping every unsynced byte, or
// keeping a random half of the pages) and counts the acknowledged rows left.
func TestSQLiteLosesAckedRowsWithoutFullSync(t *testing.T) {
	const cuts = 3
	for _, sync := range []string{"off", "normal", "full"} {
		t.Run(sync, func(t *testing.T) {
			d := NewDisk(t, Journaled)
			rng := rand.New(rand.NewPCG(29, 2))
			lossy := 0
			for cut := 0; cut < cuts; cut++ {
				path := filepath.Join(d.Dir, "acked-"+strconv.Itoa(cut)+".db")
				acked := runWriter(t, path, sync, 50+rng.IntN(150))
				kind := Cut(cut % 2)
				d.PowerCut(kind, rng)
				missing, integrity := countMissing(t, path, acked)
				if integrity != "ok" {
					t.Fatalf("cut %d (%s): integrity_check: %s", cut, kind, integrity)
				}
				t.Logf("cut %d (%s): %d of %d acknowledged rows missing", cut, kind, missing, acked)
				if missing > 0 {
					lossy++
				}
			}
			switch sync {
			case "full":
				if lossy > 0 {
					t.Fatalf("synchronous=FULL lost acknowledged rows at %d of %d cuts", lossy, cuts)
				}
			default:
				if lossy == 0 {
					t.Fatalf("synchronous=%s lost no acknowledged row in %d cuts: the filesystem does not simulate power loss", sync, cuts)
				}
			}
		})
	}
}

// runWriter starts the writer process on path, waits for n acknowledged
// rows, kills it (-9) and returns the highest acknowledged id.
func runWriter(t *testing.T, path, sync string, n int) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), writerEnv+"="+path+" "+sync)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := 0
	lines := bufio.NewScanner(out)
	for acked < n && lines.Scan() {
		if acked, err = strconv.Atoi(lines.Text()); err != nil {
			t.Fatal(err)
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	if acked < n {
		t.Fatalf("the writer stopped after %d rows", acked)
	}
	return acked
}

// countMissing opens the database after a cut and counts the acknowledged
// ids (1..acked) it lacks.
func countMissing(t *testing.T, path string, acked int) (int, string) {
	t.Helper()
	// Read a copy made by another process: this process serves the mount,
	// and SQLite touching it from here can deadlock the Go runtime (a
	// stop-the-world pause waiting on a FUSE request only this process
	// can answer).
	copied := t.TempDir()
	if out, err := exec.Command("sh", "-c", `cp "$1"* "$2"/`, "cp", path, copied).CombinedOutput(); err != nil {
		return acked, "the database is gone: " + string(out)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(copied, filepath.Base(path)))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var present int
	if err := db.QueryRow(`SELECT count(*) FROM acked WHERE id <= ?`, acked).Scan(&present); err != nil {
		if !strings.Contains(err.Error(), "no such table") {
			t.Fatal(err)
		}
		present = 0 // the table's creation was lost with the rows
	}
	var integrity string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&integrity); err != nil {
		t.Fatal(err)
	}
	return acked - present, integrity
}
