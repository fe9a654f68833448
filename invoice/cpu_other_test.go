//go:build !unix

package invoice_test

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
