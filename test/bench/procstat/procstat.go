// Package procstat reads what the benchmarks measure of a process from Linux's /proc: its resident
// set and peak resident set (/proc/PID/status) and its CPU time (/proc/PID/stat). The parsing is pure;
// the readers add only the file.
package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Memory is a process's resident set (VmRSS) and the largest it has been (VmHWM), in bytes.
type Memory struct {
	RSS, Peak float64
}

// ReadMemory reads the memory of process pid.
func ReadMemory(pid int) (Memory, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, err
	}
	return ParseStatus(string(raw))
}

// ParseStatus reads the memory out of the text of /proc/PID/status, whose sizes are in kB.
func ParseStatus(status string) (Memory, error) {
	var m Memory
	var rss, peak bool
	for line := range strings.SplitSeq(status, "\n") {
		name, value, _ := strings.Cut(line, ":")
		var into *float64
		switch name {
		case "VmRSS":
			into, rss = &m.RSS, true
		case "VmHWM":
			into, peak = &m.Peak, true
		default:
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(value), "kB")), 64)
		if err != nil {
			return Memory{}, fmt.Errorf("%s: %w", name, err)
		}
		*into = kb * 1024
	}
	if !rss || !peak {
		return Memory{}, fmt.Errorf("no VmRSS or no VmHWM in %.200q", status)
	}
	return m, nil
}

// ReadCPUSeconds reads the user plus system CPU time of process pid so far, in seconds.
func ReadCPUSeconds(pid int) (float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return ParseStat(string(raw))
}

// ParseStat reads the user plus system CPU time out of the text of /proc/PID/stat: its 14th and 15th
// fields, in clock ticks of 1/100 s (USER_HZ), counted after the command name, which may hold spaces
// and parentheses and ends at the last ") ".
func ParseStat(stat string) (float64, error) {
	i := strings.LastIndex(stat, ") ")
	if i < 0 {
		return 0, fmt.Errorf("no command name in %.200q", stat)
	}
	fields := strings.Fields(stat[i+2:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(fields))
	}
	utime, err := strconv.ParseFloat(fields[11], 64)
	if err != nil {
		return 0, fmt.Errorf("utime: %w", err)
	}
	stime, err := strconv.ParseFloat(fields[12], 64)
	if err != nil {
		return 0, fmt.Errorf("stime: %w", err)
	}
	return (utime + stime) / 100, nil
}

// Sampled is what Sample measures of a process, in MiB.
type Sampled struct {
	// RSS is the largest resident set of the samples, Peak the largest peak resident set.
	RSS, Peak float64
	// Heap is the smallest Go heap of the samples: about the live heap after a collection.
	Heap float64
}

// Sample measures process pid six times, a second apart (a measurement over time, not a wait for a
// condition), with heapBytes giving its allocated Go heap (from its metrics).
func Sample(pid int, heapBytes func() (float64, error)) (Sampled, error) {
	const mib = 1 << 20
	s := Sampled{Heap: -1}
	for i := range 6 {
		if i > 0 {
			time.Sleep(time.Second)
		}
		m, err := ReadMemory(pid)
		if err != nil {
			return Sampled{}, err
		}
		s.RSS, s.Peak = max(s.RSS, m.RSS/mib), max(s.Peak, m.Peak/mib)
		h, err := heapBytes()
		if err != nil {
			return Sampled{}, err
		}
		if h /= mib; s.Heap < 0 || h < s.Heap {
			s.Heap = h
		}
	}
	return s, nil
}
