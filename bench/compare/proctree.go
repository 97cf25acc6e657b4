package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/dexzd/dexzd/internal/bench"
)

// clockTick is USER_HZ, the unit of the times in /proc/PID/stat.
const clockTick = 10 * time.Millisecond

// procStat is what treeCPU needs from one /proc/PID/stat.
type procStat struct {
	ppid int
	cpu  time.Duration // utime + stime + cutime + cstime
}

// readProcStat parses /proc/PID/stat. The command name (field 2) may hold
// spaces and parentheses, so fields are counted from the last ')'.
func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return procStat{}, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := bytes.Fields(b[end+1:])
	// f[0] is field 3 (state): ppid is field 4, utime..cstime 14..17.
	const ppid, utime, cstime = 4 - 3, 14 - 3, 17 - 3
	if len(f) <= cstime {
		return procStat{}, fmt.Errorf("short /proc/%d/stat", pid)
	}
	var s procStat
	if s.ppid, err = strconv.Atoi(string(f[ppid])); err != nil {
		return procStat{}, fmt.Errorf("ppid of %d: %w", pid, err)
	}
	for i := utime; i <= cstime; i++ {
		v, err := strconv.ParseInt(string(f[i]), 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("field %d of /proc/%d/stat: %w", i+3, pid, err)
		}
		s.cpu += time.Duration(v) * clockTick
	}
	return s, nil
}

// treeCPU is the CPU time used so far by process root and all its
// descendants, including the descendants that have exited and been reaped
// (their time is in their parent's cutime and cstime). Linux only.
func treeCPU(root int) (bench.CPUTime, error) {
	if _, err := readProcStat(root); err != nil {
		return bench.CPUTime{}, fmt.Errorf("read the CPU time of process %d: %w", root, err)
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return bench.CPUTime{}, fmt.Errorf("list processes: %w", err)
	}
	stats := map[int]procStat{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s, err := readProcStat(pid); err == nil {
			stats[pid] = s
		}
	}
	inTree := func(pid int) bool {
		for range 64 {
			if pid == root {
				return true
			}
			s, ok := stats[pid]
			if !ok || s.ppid <= 1 {
				return false
			}
			pid = s.ppid
		}
		return false
	}
	var total time.Duration
	for pid, s := range stats {
		if inTree(pid) {
			total += s.cpu
		}
	}
	// User and system are not told apart here; all of it is reported as
	// user time.
	return bench.CPUTime{User: total}, nil
}
