//go:build !unix

package bench

import "errors"

// SelfCPU is not available on this platform.
func SelfCPU() (CPUTime, error) {
	return CPUTime{}, errors.New("the CPU time of the process is only measured on Unix")
}
