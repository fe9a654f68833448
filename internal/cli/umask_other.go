//go:build !unix

package cli

// privateFiles: there is no umask outside Unix; files get the modes hookledger
// passes explicitly (0600 files, 0700 directories) and the platform's ACLs.
func privateFiles() {}
