package replication

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/benbjohnson/litestream"
	"github.com/benbjohnson/litestream/file"
	"github.com/superfly/ltx"
)

// takeover makes the replica location free for the local database's history
// when the replica is ahead of it and the operator said so (Takeover). It
// deletes nothing it has not copied first: every LTX file at every level is
// copied to an archive beside the replica (a sibling directory for a file
// replica, a sibling prefix in the same bucket for S3) named
// "<replica>.superseded-<UTC time>", the copy is listed back and compared,
// and only then are the originals deleted. The local sidecar goes too: its
// LTX files (and any restore marker) describe the old history, and Litestream
// starts afresh from the local database, as on a first deploy.
//
// Why not leave the files and let Litestream snapshot over them? Its
// behind-the-replica path (v0.5.18) reads the replica's position from L0 only
// and takes the local state as the next TXID; the replica's later
// transactions would then age out silently with retention. Moved aside, the
// superseded history stays restorable for as long as the operator keeps it:
// point a litestream.yml at the archive and run `hookledger restore`.
func (r *Replicator) takeover(ctx context.Context, client litestream.ReplicaClient) (archive string, err error) {
	suffix := ".superseded-" + time.Now().UTC().Format("20060102T150405Z")
	rc := r.cfg.DB.Replica
	var dst litestream.ReplicaClient
	switch rc.Type {
	case "file":
		rc.Path += suffix
		dst = file.NewReplicaClient(rc.Path)
	case "s3":
		c, err := newS3Client(&rc)
		if err != nil {
			return "", err
		}
		c.Path += suffix
		rc.URL, rc.Path = "", c.Path
		rc.Bucket = c.Bucket
		dst = c
	default:
		return "", fmt.Errorf("takeover: unsupported replica type %q", rc.Type)
	}
	archive = rc.String()
	if err := dst.Init(ctx); err != nil {
		return archive, fmt.Errorf("takeover: archive %s: %w", archive, err)
	}

	var moved [][]*ltx.FileInfo
	for level := 0; level <= litestream.SnapshotLevel; level++ {
		infos, err := listLevel(ctx, client, level)
		if err != nil {
			return archive, fmt.Errorf("takeover: list replica: %w", err)
		}
		for _, info := range infos {
			if err := copyLTX(ctx, client, dst, info); err != nil {
				return archive, fmt.Errorf("takeover: copy to %s: %w (the replica is unchanged)", archive, err)
			}
		}
		moved = append(moved, infos)
	}
	for level, infos := range moved {
		got, err := listLevel(ctx, dst, level)
		if err != nil {
			return archive, fmt.Errorf("takeover: list archive %s: %w (the replica is unchanged)", archive, err)
		}
		if !sameFiles(infos, got) {
			return archive, fmt.Errorf("takeover: archive %s level %d holds %d files, the replica %d (the replica is unchanged)",
				archive, level, len(got), len(infos))
		}
	}
	for _, infos := range moved {
		if len(infos) == 0 {
			continue
		}
		if err := client.DeleteLTXFiles(ctx, infos); err != nil {
			return archive, fmt.Errorf("takeover: the replica is copied to %s, but deleting it failed: %w", archive, err)
		}
	}
	if err := os.RemoveAll(MetaPath(r.path)); err != nil {
		return archive, fmt.Errorf("takeover: remove the local sidecar: %w", err)
	}
	return archive, nil
}

func listLevel(ctx context.Context, c litestream.ReplicaClient, level int) ([]*ltx.FileInfo, error) {
	itr, err := c.LTXFiles(ctx, level, 0, false)
	if err != nil {
		return nil, err
	}
	var infos []*ltx.FileInfo
	for itr.Next() {
		info := *itr.Item()
		info.Level = level
		infos = append(infos, &info)
	}
	return infos, itr.Close()
}

func copyLTX(ctx context.Context, src, dst litestream.ReplicaClient, info *ltx.FileInfo) error {
	rd, err := src.OpenLTXFile(ctx, info.Level, info.MinTXID, info.MaxTXID, 0, 0)
	if err != nil {
		return err
	}
	defer rd.Close()
	_, err = dst.WriteLTXFile(ctx, info.Level, info.MinTXID, info.MaxTXID, rd)
	return err
}

func sameFiles(a, b []*ltx.FileInfo) bool {
	if len(a) != len(b) {
		return false
	}
	seen := make(map[[2]ltx.TXID]int64, len(a))
	for _, f := range a {
		seen[[2]ltx.TXID{f.MinTXID, f.MaxTXID}] = f.Size
	}
	for _, f := range b {
		if size, ok := seen[[2]ltx.TXID{f.MinTXID, f.MaxTXID}]; !ok || size != f.Size {
			return false
		}
	}
	return true
}
