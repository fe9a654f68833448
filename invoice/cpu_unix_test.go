//go:build unix

package invoice_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user and system) this process has used so
// far, or false where it cannot be read. On a machine shared with other
// work it says what an operation cost better than its wall time does.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
