package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/benbjohnson/litestream"
	"github.com/benbjohnson/litestream/file"
	"github.com/benbjohnson/litestream/s3"
	"github.com/superfly/ltx"
)

// ErrClosed is returned by a Replicator that is not open.
var ErrClosed = errors.New("replicator is not open")

// ErrNotStarted means the Replicator is open but not replicating yet: its
// first attempts to reach the replica failed (or found it ahead) and it keeps
// trying in the background. Commits stay local meanwhile.
var ErrNotStarted = errors.New("replication has not started")

// Replicator runs Litestream inside the process for one database.
//
// Order of operations:
//
//	app opens *sql.DB and migrates  →  Replicator.Open
//	… serve; Sync when a reply must wait for the replica …
//	app closes its *sql.DB          →  Replicator.Close
//
// The app's database must be closed first so that no commit can land after
// Close's final sync. The app should open its connections with
// wal_autocheckpoint(0) while a Replicator runs: Litestream checkpoints on
// its own schedule, and an autocheckpoint would only add checkpoint I/O to the
// writer's commits (it cannot recycle WAL frames Litestream has not copied,
// because Litestream holds a read transaction that pins them).
type Replicator struct {
	// ShutdownSyncTimeout bounds Close's final sync, so a dead replica cannot
	// hang shutdown. Default: the config's shutdown-sync-timeout (10 s unless
	// set). Zero means one attempt bounded only by Close's context.
	ShutdownSyncTimeout time.Duration

	// Logger receives Litestream's logs. Default: slog.Default().
	Logger *slog.Logger

	// Takeover: when the replica holds later transactions than the local
	// database, move the replica's files aside and replicate the local
	// database as a new history instead of refusing (see takeover.go).
	Takeover bool

	// While replication cannot start (the replica is unreachable, or ahead),
	// Open's background attempts wait RetryInterval at first, growing to
	// MaxRetryInterval; AttemptTimeout bounds one attempt. Defaults 500 ms,
	// 30 s and 30 s: a replica that comes back is noticed within about 30 s,
	// and an unreachable S3 costs one LIST (with the SDK's own retries) per
	// attempt, not a tight loop.
	RetryInterval    time.Duration
	MaxRetryInterval time.Duration
	AttemptTimeout   time.Duration

	// MaxWALGrowth is how far the -wal file may grow while Litestream cannot
	// capture the WAL, past its size at the last good capture, before
	// CheckWAL stops commits (capture.go). Default DefaultMaxWALGrowth
	// (64 MiB); zero or less: no such bound.
	MaxWALGrowth int64

	// FreeSpace, when set, reports the bytes free on the database's disk;
	// CheckWAL then also keeps half of it for Litestream's next cut. serve
	// sets it. nil: only MaxWALGrowth bounds the WAL.
	FreeSpace func() (uint64, error)

	cfg  *Config
	path string

	// Status holds mu shared for its whole call and Close holds it
	// exclusively. Sync holds it only to start: its goroutine may be stuck
	// behind a hung upload that only closing the store cancels, so Close
	// closes the store first and then waits for those goroutines (bounded).
	mu      sync.RWMutex
	syncs   sync.WaitGroup // Sync goroutines still running
	db      *litestream.DB
	store   *litestream.Store
	client  *trackingClient
	capture capture // the cuts of the WAL, which hookledger runs (capture.go)

	// Start-up state (start.go), under mu.
	opened, closed bool
	tried, checked bool  // Check ran; it found the replica not ahead
	pending        error // why replication is not running yet; nil once it runs
	stopRetry      context.CancelFunc
	retryDone      chan struct{}
}

// NewReplicator returns a Replicator for dbPath, which must be the database
// named in cfg. Set fields, then call Open.
func NewReplicator(cfg *Config, dbPath string) (*Replicator, error) {
	if err := cfg.CheckDB(dbPath); err != nil {
		return nil, err
	}
	client, err := newReplicaClient(&cfg.DB.Replica)
	if err != nil {
		return nil, err
	}
	return &Replicator{
		ShutdownSyncTimeout: cfg.ShutdownSyncTimeout,
		Logger:              slog.Default(),
		RetryInterval:       500 * time.Millisecond,
		MaxRetryInterval:    30 * time.Second,
		AttemptTimeout:      30 * time.Second,
		MaxWALGrowth:        DefaultMaxWALGrowth,
		cfg:                 cfg,
		path:                cfg.DB.Path,
		client:              &trackingClient{ReplicaClient: client},
	}, nil
}

// Sync returns once the replica holds every transaction committed before the
// call: it cuts the WAL into an LTX file (recorded as capture.go's cuts are)
// and uploads all pending LTX files (what DB.SyncAndWait does). Concurrent
// calls queue on Litestream's locks, so callers batch naturally: one Sync
// covers every commit that preceded it.
//
// Litestream's sync can wait on an internal mutex, held by a background
// upload to a hung replica, without watching ctx. So the sync runs in its own
// goroutine and Sync returns when ctx ends even then: a hung replica turns
// into an error (503 in ACK-after-replica mode), never a hung caller.
func (r *Replicator) Sync(ctx context.Context) error {
	r.mu.RLock()
	db, pending := r.db, r.pending
	if db != nil {
		r.syncs.Add(1)
	}
	r.mu.RUnlock()
	if db == nil {
		if pending != nil {
			return fmt.Errorf("%w: %w", ErrNotStarted, pending)
		}
		return ErrClosed
	}
	done := make(chan error, 1)
	go func() {
		defer r.syncs.Done()
		err := r.cut(ctx, db)
		if err == nil {
			if err = db.Replica.Sync(ctx); err != nil {
				err = fmt.Errorf("replica sync: %w", err)
			}
		}
		done <- r.client.record(err)
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		err = r.client.record(fmt.Errorf("sync did not finish: %w", ctx.Err()))
	}
	if err != nil {
		return fmt.Errorf("%s: %w", r.cfg.DB.Replica.String(), err) // Litestream says "replica sync: …"
	}
	return nil
}

// Close stops replication after a final sync bounded by ShutdownSyncTimeout.
// Close the application's *sql.DB first (see Replicator). The replicator
// cannot be reopened.
func (r *Replicator) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	stop, done := r.stopRetry, r.retryDone
	r.mu.Unlock()
	if stop != nil {
		stop() // an attempt to reach the replica must not delay shutdown
		<-done
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = nil
	return r.close(ctx)
}

func (r *Replicator) close(ctx context.Context) error {
	if r.store == nil {
		return nil
	}
	if r.ShutdownSyncTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.ShutdownSyncTimeout)
		defer cancel()
	}
	// The cuts stop first: the store's final sync is the last. Closing the
	// store cancels Litestream's background work, which frees any Sync
	// goroutine stuck behind it; then wait for those, within ctx.
	r.stopCapture()
	err := r.client.record(r.store.Close(ctx))
	r.store, r.db = nil, nil
	synced := make(chan struct{})
	go func() { r.syncs.Wait(); close(synced) }()
	select {
	case <-synced:
	case <-ctx.Done():
	}
	if err != nil {
		return fmt.Errorf("stop replication of %s: %w", r.path, err)
	}
	return nil
}

// trackingClient remembers the replica's last error: Litestream's background
// uploads only log failures, and /readyz must be able to report them.
type trackingClient struct {
	litestream.ReplicaClient

	mu        sync.Mutex
	lastErr   error
	lastErrAt time.Time
}

func (c *trackingClient) record(err error) error {
	if err != nil && !errors.Is(err, context.Canceled) {
		c.mu.Lock()
		c.lastErr, c.lastErrAt = err, time.Now()
		c.mu.Unlock()
	}
	return err
}

func (c *trackingClient) WriteLTXFile(ctx context.Context, level int, minTXID, maxTXID ltx.TXID, rd io.Reader) (*ltx.FileInfo, error) {
	info, err := c.ReplicaClient.WriteLTXFile(ctx, level, minTXID, maxTXID, rd)
	return info, c.record(err)
}

func (c *trackingClient) LTXFiles(ctx context.Context, level int, seek ltx.TXID, useMetadata bool) (ltx.FileIterator, error) {
	itr, err := c.ReplicaClient.LTXFiles(ctx, level, seek, useMetadata)
	return itr, c.record(err)
}

// String names the replica for logs and status output, without credentials.
func (rc *ReplicaConfig) String() string {
	if rc.Type == "file" {
		return "file:" + rc.Path
	}
	if rc.URL != "" {
		u, _, _ := strings.Cut(rc.URL, "?")
		return u
	}
	return "s3://" + rc.Bucket + "/" + strings.TrimPrefix(rc.Path, "/")
}

func newReplicaClient(rc *ReplicaConfig) (litestream.ReplicaClient, error) {
	switch rc.Type {
	case "file":
		return file.NewReplicaClient(rc.Path), nil
	case "s3":
		// Litestream's S3 client brings its own *http.Client, to which the
		// AWS SDK cannot add AWS_CA_BUNDLE's roots: Init would fail with
		// "unable to add custom RootCAs HTTPClient". Say what to do instead.
		if os.Getenv("AWS_CA_BUNDLE") != "" {
			return nil, errors.New("s3 replica: Litestream v0.5.18 cannot use AWS_CA_BUNDLE; " +
				"unset it and put extra CA certificates in SSL_CERT_FILE or SSL_CERT_DIR, which Go reads")
		}
		return newS3Client(rc)
	}
	return nil, fmt.Errorf("unsupported replica type %q", rc.Type)
}

// newS3Client builds the client the way the stock CLI builds it from
// litestream.yml (NewS3ReplicaClientFromConfig), for the keys we accept.
func newS3Client(rc *ReplicaConfig) (*s3.ReplicaClient, error) {
	bucket, prefix, region, endpoint := rc.Bucket, rc.Path, rc.Region, rc.Endpoint
	pathStyle, pathStyleSet, skipVerify := endpoint != "", rc.ForcePathStyle != nil, rc.SkipVerify
	if rc.URL != "" {
		_, host, upath, query, _, err := litestream.ParseReplicaURLWithQuery(rc.URL)
		if err != nil {
			return nil, err
		}
		for key := range query {
			switch key {
			case "endpoint", "region", "forcePathStyle", "force-path-style", "skipVerify", "skip-verify":
			default:
				return nil, fmt.Errorf("url parameter %q is not supported", key)
			}
		}
		ubucket, uregion, uendpoint, upathStyle := s3.ParseHost(host)
		if strings.HasPrefix(host, "arn:") {
			ubucket, uregion, uendpoint, upathStyle = host, litestream.RegionFromS3ARN(host), "", false
		}
		if v := query.Get("endpoint"); v != "" {
			uendpoint, _ = litestream.EnsureEndpointScheme(v)
			upathStyle = true
		}
		if v := query.Get("region"); v != "" {
			uregion = v
		}
		if v, ok := litestream.BoolQueryValue(query, "forcePathStyle", "force-path-style"); ok {
			upathStyle, pathStyleSet = v, true
		}
		if v, ok := litestream.BoolQueryValue(query, "skipVerify", "skip-verify"); ok {
			skipVerify = v
		}
		bucket, prefix = ubucket, upath
		if region == "" {
			region = uregion
		}
		if endpoint == "" {
			endpoint = uendpoint
		}
		if rc.ForcePathStyle == nil && !pathStyle {
			pathStyle = upathStyle
		}
	}
	if rc.ForcePathStyle != nil {
		pathStyle = *rc.ForcePathStyle
	}
	if bucket == "" {
		return nil, errors.New("bucket required for s3 replica")
	}
	// Provider quirks, as in the stock CLI.
	if !pathStyleSet && (litestream.IsFilebaseEndpoint(endpoint) || litestream.IsBackblazeEndpoint(endpoint) ||
		litestream.IsMinIOEndpoint(endpoint) || litestream.IsSupabaseEndpoint(endpoint) || litestream.IsNeonEndpoint(endpoint)) {
		pathStyle = true
	}
	c := s3.NewReplicaClient()
	c.Bucket, c.Path, c.Region, c.Endpoint = bucket, prefix, region, endpoint
	c.ForcePathStyle, c.SkipVerify = pathStyle, skipVerify
	c.AccessKeyID, c.SecretAccessKey = rc.AccessKeyID, rc.SecretAccessKey
	if litestream.IsTigrisEndpoint(endpoint) {
		c.RequireContentMD5 = false
		c.Concurrency, c.PartSize = s3.DefaultTigrisConcurrency, s3.DefaultTigrisPartSize
	}
	if litestream.IsCloudflareR2Endpoint(endpoint) {
		c.Concurrency = s3.DefaultR2Concurrency
	}
	// The stock CLI copies LITESTREAM_* credentials to AWS_* when those are
	// unset; without touching our environment, the effect is the same.
	if c.AccessKeyID == "" && os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		c.AccessKeyID = os.Getenv("LITESTREAM_ACCESS_KEY_ID")
	}
	if c.SecretAccessKey == "" && os.Getenv("AWS_SECRET_ACCESS_KEY") == "" {
		c.SecretAccessKey = os.Getenv("LITESTREAM_SECRET_ACCESS_KEY")
	}
	return c, nil
}
