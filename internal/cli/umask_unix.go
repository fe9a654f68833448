//go:build unix

package cli

import "syscall"

// privateFiles sets the process umask to 077 before any command runs, so
// every file hookledger creates, including those SQLite (-wal, -shm) and
// Litestream (replica LTX files, restore output) create on their own, is
// 0600 and every directory 0700, whatever umask the shell or service manager
// passed on: they all hold raw webhook bodies. deploy/hookledger.service sets
// UMask=0077 as well; this makes a manual start just as private.
func privateFiles() { syscall.Umask(0o077) }
