//go:build unix

package bench

import (
	"fmt"
	"syscall"
	"time"
)

// SelfCPU is the processor time this process (all its threads) has used so
// far, from getrusage(RUSAGE_SELF).
func SelfCPU() (CPUTime, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return CPUTime{}, fmt.Errorf("getrusage: %w", err)
	}
	return CPUTime{User: time.Duration(ru.Utime.Nano()), System: time.Duration(ru.Stime.Nano())}, nil
}
