package cli

import (
	"fmt"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/replication"
)

func replicaCommand() *cli.Command {
	return &cli.Command{
		Name:  "replica",
		Usage: "inspect the Litestream replica",
		Subcommands: []*cli.Command{{
			Name:  "status",
			Usage: "local and replica positions, lag, last successful sync and last error",
			Description: "Reads the database's Litestream sidecar and lists the replica; works whether or not serve is\n" +
				"running (a running serve publishes its last sync and last error every few seconds). Reads only.\n" +
				"Exits 3 when the replica is missing, holds no backup, cannot be read, or is behind by more than\n" +
				"--max-lag (the status is still printed, with the problem); 1 when there is no database or no\n" +
				"litestream.yml; 0 when the replica is healthy. For cron and monitoring.",
			Flags: []cli.Flag{
				litestreamConfigFlag(),
				&cli.DurationFlag{Name: "max-lag", Value: time.Minute, EnvVars: []string{"HOOKLEDGER_MAX_LAG"},
					Usage: "a replica behind by more than this (the age of the oldest change not yet replicated) is a problem"},
				formatFlag(),
			},
			Action: replicaStatus,
		}},
	}
}

// ReplicaStatusJSON is `replica status --format json`: stable snake_case names,
// TXIDs as the hex Litestream prints, lag in seconds.
type ReplicaStatusJSON struct {
	Database    string  `json:"database"`
	Replica     string  `json:"replica"`
	LocalTXID   string  `json:"local_txid"`
	ReplicaTXID string  `json:"replica_txid"`
	InSync      bool    `json:"in_sync"`
	LagBytes    int64   `json:"lag_bytes"`
	LagSeconds  float64 `json:"lag_seconds"`
	// WALState says whether every commit in the database's WAL has been cut
	// into an LTX file Litestream can upload: captured, pending, unknown or
	// "no history". Pending bytes count in lag_bytes.
	WALState        string     `json:"wal_state"`
	WALReason       string     `json:"wal_reason"`
	WALPendingBytes int64      `json:"wal_pending_bytes"`
	WALModifiedAt   *time.Time `json:"wal_modified_at"`
	CapturedAt      *time.Time `json:"captured_at"` // Litestream's last cut of the WAL
	LastSyncAt      *time.Time `json:"last_sync_at"`
	LastError       string     `json:"last_error"`
	LastErrorAt     *time.Time `json:"last_error_at"`
	ReportedAt      *time.Time `json:"reported_at"` // when a running serve last published last_sync_at/last_error
	// Problem is why the command exits 3: the replica is missing, empty,
	// unreadable or behind by more than max_lag_seconds; "" when healthy.
	Problem       string  `json:"problem"`
	MaxLagSeconds float64 `json:"max_lag_seconds"`
	Error         string  `json:"error,omitempty"`
}

func replicaStatus(c *cli.Context) error {
	format := c.String("format")
	cfg, err := requireLitestream(c)
	if err != nil {
		return err
	}
	maxLag := c.Duration("max-lag")
	if maxLag < 0 {
		return usageErrorf(c, "--max-lag: must not be negative")
	}
	if _, err := os.Stat(cfg.DB.Path); err != nil {
		return fmt.Errorf("no database at %s (the database in %s): nothing is replicated from here; run `hookledger serve` or `hookledger restore`", cfg.DB.Path, cfg.File)
	}
	st, readErr := replication.ReadStatus(c.Context, cfg)
	v := ReplicaStatusJSON{
		Database: st.DBPath, Replica: st.Replica, LocalTXID: st.LocalTXID.String(), ReplicaTXID: st.ReplicaTXID.String(),
		InSync: st.InSync, LagBytes: st.LagBytes, LagSeconds: st.LagTime.Seconds(), LastError: st.LastError,
		LastSyncAt: timeOrNil(st.LastSyncAt), LastErrorAt: timeOrNil(st.LastErrorAt), ReportedAt: timeOrNil(st.ReportedAt),
		WALState: string(st.WAL), WALReason: st.WALReason, WALPendingBytes: st.WALPendingBytes,
		WALModifiedAt: timeOrNil(st.WALModTime), CapturedAt: timeOrNil(st.CapturedAt),
		MaxLagSeconds: maxLag.Seconds(),
	}
	if readErr != nil {
		v.Error = readErr.Error()
	}
	v.Problem = replicaProblem(cfg, st, readErr, maxLag)
	now := time.Now()
	when := func(t *time.Time) string {
		if t == nil {
			return "never"
		}
		return t.Format(time.RFC3339) + " (" + now.Sub(*t).Round(time.Second).String() + " ago)"
	}
	lastErr := "none"
	if st.LastError != "" {
		lastErr = st.LastError + " at " + when(v.LastErrorAt)
	}
	if st.ReportedAt.IsZero() {
		lastErr = "unknown (serve is not running here)"
	} else {
		age := now.Sub(st.ReportedAt)
		lastErr += ", reported by serve " + age.Round(time.Second).String() + " ago"
		if age > replication.ReportStale {
			// serve rewrites it every few seconds, even on a full disk.
			lastErr += " (stale: serve has stopped, or is stuck)"
		}
	}
	rows := [][2]string{
		{"database", v.Database},
		{"replica", v.Replica},
		{"local txid", v.LocalTXID},
		{"replica txid", v.ReplicaTXID},
		{"in sync", map[bool]string{true: "yes", false: "no"}[v.InSync]},
		{"lag", fmt.Sprintf("%d bytes, %s", v.LagBytes, st.LagTime.Round(time.Millisecond))},
		{"wal", walState(st)},
		{"last cut", when(v.CapturedAt)},
		{"last sync", when(v.LastSyncAt)},
		{"last error", lastErr},
	}
	if readErr != nil {
		rows = append(rows, [2]string{"replica error", readErr.Error()})
	}
	if v.Problem != "" {
		rows = append(rows, [2]string{"problem", v.Problem})
	}
	switch format {
	case "json":
		err = writeRecords(c.App.Writer, format, nil, nil, v)
	case "csv":
		// The JSON fields, as numbers and RFC 3339 times, for scripts.
		stamp := func(t *time.Time) string {
			if t == nil {
				return ""
			}
			return t.Format(time.RFC3339Nano)
		}
		header := []string{"database", "replica", "local_txid", "replica_txid", "in_sync", "lag_bytes", "lag_seconds",
			"wal_state", "wal_reason", "wal_pending_bytes", "wal_modified_at", "captured_at", "last_sync_at", "last_error", "last_error_at", "reported_at", "problem", "max_lag_seconds", "error"}
		values := []string{v.Database, v.Replica, v.LocalTXID, v.ReplicaTXID, strconv.FormatBool(v.InSync),
			strconv.FormatInt(v.LagBytes, 10), strconv.FormatFloat(v.LagSeconds, 'f', -1, 64),
			v.WALState, v.WALReason, strconv.FormatInt(v.WALPendingBytes, 10), stamp(v.WALModifiedAt), stamp(v.CapturedAt),
			stamp(v.LastSyncAt), v.LastError,
			stamp(v.LastErrorAt), stamp(v.ReportedAt), v.Problem, strconv.FormatFloat(v.MaxLagSeconds, 'f', -1, 64), v.Error}
		err = writeRecords(c.App.Writer, format, header, [][]string{values}, v)
	default:
		tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
		}
		err = tw.Flush()
	}
	if err != nil {
		return err
	}
	if v.Problem != "" {
		return problem(fmt.Errorf("replica status: %s", v.Problem))
	}
	return nil
}

// replicaProblem is why the replica cannot be relied on, or "".
func replicaProblem(cfg *replication.Config, st replication.Status, readErr error, maxLag time.Duration) string {
	rc := cfg.DB.Replica
	switch {
	case readErr != nil:
		return "cannot read the replica: " + readErr.Error()
	case rc.Type == "file" && !dirExists(rc.Path):
		return fmt.Sprintf("the replica directory %s does not exist (has serve replicated with %s?)", rc.Path, cfg.File)
	case st.ReplicaTXID == 0:
		return "the replica holds no backup yet"
	case st.WAL == replication.WALUnknown && st.LagTime > maxLag:
		return "cannot tell whether the replica holds every commit: " + st.WALReason
	case !st.InSync && st.LagTime > maxLag:
		return fmt.Sprintf("the replica is behind by %s (more than --max-lag %s): %d bytes not replicated",
			st.LagTime.Round(time.Second), maxLag, st.LagBytes)
	}
	return ""
}

// walState describes the WAL's commits against Litestream's last cut.
func walState(st replication.Status) string {
	switch st.WAL {
	case replication.WALPending:
		return fmt.Sprintf("%s, %d bytes not cut yet", st.WAL, st.WALPendingBytes)
	case replication.WALUnknown:
		return fmt.Sprintf("%s: %s", st.WAL, st.WALReason)
	}
	return string(st.WAL)
}

func dirExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}
