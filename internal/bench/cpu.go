package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// clockTick is the unit of the times in /proc/PID/stat: USER_HZ, which
// Linux fixes at 100 on every architecture Dex-ZD runs on.
const clockTick = 10 * time.Millisecond

// ProcessCPU reads the processor time process pid has used so far, from
// /proc/PID/stat (Linux only), with clock-tick (10 ms) resolution.
func ProcessCPU(pid int) (CPUTime, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return CPUTime{}, fmt.Errorf("read the CPU time of process %d: %w", pid, err)
	}
	c, err := parseProcStat(b)
	if err != nil {
		return CPUTime{}, fmt.Errorf("read the CPU time of process %d: %w", pid, err)
	}
	return c, nil
}

// parseProcStat takes utime and stime (fields 14 and 15) from the contents
// of /proc/PID/stat. Field 2, the command name in parentheses, may itself
// hold spaces and parentheses, so the fields are counted from the last ')'.
func parseProcStat(b []byte) (CPUTime, error) {
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return CPUTime{}, fmt.Errorf("malformed stat line %q", b)
	}
	// After ") " come field 3 (state), 4, ...; utime is field 14.
	f := bytes.Fields(b[end+1:])
	const utime, stime = 14 - 3, 15 - 3
	if len(f) <= stime {
		return CPUTime{}, fmt.Errorf("stat line has %d fields after the command, want more than %d", len(f), stime)
	}
	u, err := strconv.ParseUint(string(f[utime]), 10, 64)
	if err != nil {
		return CPUTime{}, fmt.Errorf("utime: %w", err)
	}
	s, err := strconv.ParseUint(string(f[stime]), 10, 64)
	if err != nil {
		return CPUTime{}, fmt.Errorf("stime: %w", err)
	}
	return CPUTime{User: time.Duration(u) * clockTick, System: time.Duration(s) * clockTick}, nil
}
