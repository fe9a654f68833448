//go:build !unix

package ledger_test

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
