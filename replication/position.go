package replication

import (
	"github.com/hookledger/hookledger/durable"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/benbjohnson/litestream"
	"github.com/superfly/ltx"
)

// ErrReplicaAhead means the replica holds later transactions than the local
// database: a machine restored at an older point, an old copy of the
// database, or a new empty one. Litestream would replicate it anyway (it
// logs "detected database behind replica" and snapshots the local state as
// the replica's newest), so the replica's latest state would go back in time
// and the later transactions would age out of it. The Replicator refuses
// unless Takeover is set.
var ErrReplicaAhead = errors.New("the replica holds later transactions than the local database")

// AheadError is ErrReplicaAhead with both positions.
type AheadError struct {
	DBPath      string
	Replica     string
	LocalTXID   TXID
	Restored    bool // LocalTXID comes from the marker `hookledger restore` left
	ReplicaTXID TXID
}

func (e *AheadError) Error() string {
	local := "has no replication history (a new database, or one restored by another tool)"
	if e.LocalTXID != 0 {
		local = "is at txid " + e.LocalTXID.String()
		if e.Restored {
			local += " (restored at that point)"
		}
	}
	return fmt.Sprintf("%s: %s is at txid %s, %s %s; replicating it would take the replica's latest state back in time. "+
		"To continue from the replica, stop and restore its latest state (hookledger restore; --force replaces this database). "+
		"To make this database the replica's new history instead, start serve once with --replica-takeover "+
		"(it moves the replica's current files aside, whole, and logs where)",
		ErrReplicaAhead.Error(), e.Replica, e.ReplicaTXID, e.DBPath, local)
}

func (e *AheadError) Unwrap() error { return ErrReplicaAhead }

// restoredFile, inside the database's Litestream sidecar, records the TXID a
// restore left the database at. Restore removes the old sidecar, and with it
// every local record of a position, so without this file a database restored
// at the replica's latest state would look exactly like a new empty one.
const restoredFile = "hookledger-restored.json"

type restoredMarker struct {
	TXID       string    `json:"txid"`
	RestoredAt time.Time `json:"restored_at"`
	Replica    string    `json:"replica"`
}

func writeRestoredMarker(dbPath string, txid TXID, replica string) error {
	dir := MetaPath(dbPath)
	if err := durable.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	buf, err := json.Marshal(restoredMarker{TXID: txid.String(), RestoredAt: time.Now().UTC(), Replica: replica})
	if err != nil {
		return err
	}
	path := filepath.Join(dir, restoredFile)
	f, err := os.OpenFile(path+".tmp", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer os.Remove(path + ".tmp")
	// A marker that did not reach the disk whole must not be renamed into
	// place: LocalTXID would read a torn or empty position.
	_, err = f.Write(buf)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write restore marker: %w", err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return err
	}
	return durable.SyncDir(dir)
}

// LocalTXID is the local database's replication position: the newest LTX
// file Litestream has cut into its sidecar, or the TXID a restore left it
// at, whichever is later. restored says the restore marker decided. 0 means
// no history at all: a new database (or one restored by another tool).
func LocalTXID(dbPath string) (txid TXID, restored bool, err error) {
	ents, err := os.ReadDir(filepath.FromSlash(litestream.LTXLevelDir(MetaPath(dbPath), 0)))
	if err != nil && !os.IsNotExist(err) {
		return 0, false, fmt.Errorf("read local replication position: %w", err)
	}
	for _, ent := range ents {
		if _, maxTXID, err := ltx.ParseFilename(ent.Name()); err == nil {
			txid = max(txid, maxTXID)
		}
	}
	buf, err := os.ReadFile(filepath.Join(MetaPath(dbPath), restoredFile))
	switch {
	case os.IsNotExist(err):
	case err != nil:
		return 0, false, fmt.Errorf("read restore marker: %w", err)
	default:
		var m restoredMarker
		if err := json.Unmarshal(buf, &m); err != nil {
			return 0, false, fmt.Errorf("read restore marker %s: %w", restoredFile, err)
		}
		r, err := ParseTXID(m.TXID)
		if err != nil {
			return 0, false, fmt.Errorf("read restore marker %s: %w", restoredFile, err)
		}
		if r > txid {
			txid, restored = r, true
		}
	}
	return txid, restored, nil
}

// replicaTXID is the newest TXID the replica holds at any level: L0 may
// already be compacted away while L1+ and snapshots still reach further.
func replicaTXID(ctx context.Context, client litestream.ReplicaClient) (TXID, error) {
	var txid TXID
	for level := 0; level <= litestream.SnapshotLevel; level++ {
		itr, err := client.LTXFiles(ctx, level, 0, false)
		if err != nil {
			return 0, err
		}
		for itr.Next() {
			txid = max(txid, itr.Item().MaxTXID)
		}
		if err := itr.Close(); err != nil {
			return 0, err
		}
	}
	return txid, nil
}
