package replication

import (
	"context"
	"fmt"
	"time"

	"github.com/benbjohnson/litestream"
	"github.com/superfly/ltx"
)

// pruneEvery is how often the levels below the top are pruned: soon after
// each compaction into the level above, whose intervals are minutes.
const pruneEvery = time.Minute

// Pruning: Litestream keeps every compacted level's files until it deletes
// a snapshot older than snapshot.retention, and then only those before that
// deleted snapshot (so a restore that had begun from it can finish): each
// level holds a copy of up to three snapshot intervals of changes. The
// levels below the top repeat what the level above already holds at a
// coarser grain, and at 30 s the first level is the largest: in a 50-minute
// soak the replica held 5.6 GB for a 1.09 GB database, 3.4 GB of it level 1.
// hookledger deletes a level's files once the level above covers them, and
// the top level's once they end before the oldest snapshot kept (a restore
// starts from a snapshot, so nothing before the oldest one is read). L0 stays
// under Litestream's l0-retention, snapshots under its snapshot.retention.
// A restore takes, from each point on, the file that reaches furthest in any
// level, so it never needs a covered file: point-in-time restore keeps its
// reach and is as fine-grained as the files left, L0's seconds for the last
// minutes, the next-to-top level's interval within the top level's, the top
// level's beyond. docs/backups.md has the arithmetic.

// prune prunes the replica (the capture runs it every pruneEvery); a
// failure is logged and tried again at the next.
func (r *Replicator) prune(ctx context.Context, db *litestream.DB) {
	if err := pruneLevels(ctx, db, len(r.cfg.Levels)); err != nil && ctx.Err() == nil {
		r.Logger.Warn("pruning the replica's covered files failed; retrying in a minute", "error", err)
	}
}

// pruneLevels deletes, in levels 1 to top-1, the files the next level up covers,
// and in the top level those that end before the oldest snapshot.
// Litestream keeps the newest file of a level (the next compaction reads
// from its end), and leaves deletion to bucket lifecycle rules when its
// retention is disabled.
func pruneLevels(ctx context.Context, db *litestream.DB, top int) error {
	oldest, err := oldestSnapshot(ctx, db.Replica.Client)
	if err != nil {
		return err
	}
	if oldest > 0 && top > 0 {
		if err := db.EnforceRetentionByTXID(ctx, top, oldest); err != nil {
			return fmt.Errorf("prune level %d: %w", top, err)
		}
	}
	for level := top - 1; level >= 1; level-- {
		covered, err := maxTXID(ctx, db.Replica.Client, level+1)
		if err != nil {
			return err
		}
		if covered == 0 {
			continue
		}
		if err := db.EnforceRetentionByTXID(ctx, level, covered+1); err != nil {
			return fmt.Errorf("prune level %d: %w", level, err)
		}
	}
	return nil
}

// oldestSnapshot is the last transaction the oldest snapshot holds, 0 when
// there is none.
func oldestSnapshot(ctx context.Context, client litestream.ReplicaClient) (ltx.TXID, error) {
	itr, err := client.LTXFiles(ctx, litestream.SnapshotLevel, 0, false)
	if err != nil {
		return 0, fmt.Errorf("list snapshots: %w", err)
	}
	defer itr.Close()
	if itr.Next() {
		return itr.Item().MaxTXID, nil
	}
	return 0, itr.Err()
}

// maxTXID is the last transaction a level's files reach, 0 when it has none.
func maxTXID(ctx context.Context, client litestream.ReplicaClient, level int) (ltx.TXID, error) {
	itr, err := client.LTXFiles(ctx, level, 0, false)
	if err != nil {
		return 0, fmt.Errorf("list level %d: %w", level, err)
	}
	defer itr.Close()
	var max ltx.TXID
	for itr.Next() {
		max = itr.Item().MaxTXID // in order of TXID
	}
	return max, itr.Err()
}
