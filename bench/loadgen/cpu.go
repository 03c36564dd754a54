package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// cpuMeter reads, from Linux's /proc, the CPU time (user + system) of
// named processes and of their live children, and of the children they
// already reaped: what a server and a database (a PostgreSQL postmaster
// with its backends) spent, so that a slice can report CPU per request,
// which moves less than throughput on a machine shared with other work.
type cpuMeter struct {
	names []string
	pids  []int
}

// parseCPU parses -cpu: comma-separated NAME=PID.
func parseCPU(s string) (*cpuMeter, error) {
	if s == "" {
		return nil, nil
	}
	m := &cpuMeter{}
	for _, e := range splitList(s) {
		name, p, ok := strings.Cut(e, "=")
		pid, err := strconv.Atoi(p)
		if !ok || name == "" || err != nil || pid <= 0 {
			return nil, fmt.Errorf("-cpu entry %q: want NAME=PID", e)
		}
		if _, _, err := procCPU(pid); err != nil {
			return nil, fmt.Errorf("-cpu %s: %v", e, err)
		}
		m.names, m.pids = append(m.names, name), append(m.pids, pid)
	}
	return m, nil
}

// procCPU returns a process's parent and its CPU time in ticks, its own
// plus that of the children it reaped.
func procCPU(pid int) (ppid int, ticks int64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces;
	// field 3 starts after the last ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 15 {
		return 0, 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ppid, _ = strconv.Atoi(f[1])
	for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime
		v, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += v
	}
	return ppid, ticks, nil
}

// read returns each named process's CPU time so far in milliseconds.
func (m *cpuMeter) read() map[string]float64 {
	if m == nil {
		return nil
	}
	ticks := make([]int64, len(m.pids))
	index := map[int]int{}
	for i, pid := range m.pids {
		index[pid] = i
		_, ticks[i], _ = procCPU(pid)
	}
	if ents, err := os.ReadDir("/proc"); err == nil {
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if ppid, t, err := procCPU(pid); err == nil {
				if i, ok := index[ppid]; ok {
					ticks[i] += t
				}
			}
		}
	}
	out := map[string]float64{}
	for i, name := range m.names {
		out[name] = float64(ticks[i]) * 1000 / userHZ
	}
	return out
}

// userHZ is the unit of /proc's CPU times: USER_HZ, 100 on Linux.
const userHZ = 100

// cpuSince is now - before per name.
func cpuSince(before, now map[string]float64) map[string]float64 {
	if before == nil {
		return nil
	}
	out := map[string]float64{}
	for k, v := range now {
		out[k] = v - before[k]
	}
	return out
}
