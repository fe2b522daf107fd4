package bench

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Usage is what the kernel says this process has used.
type Usage struct {
	CPU time.Duration // user + system
	// PeakRSSKiB is the peak resident set size (VmHWM). ru_maxrss is not
	// used: Linux carries it over from the parent across fork and exec.
	PeakRSSKiB int64
	// RSSKiB is the resident set size now (VmRSS).
	RSSKiB int64
}

// selfUsage reads getrusage(RUSAGE_SELF) and /proc/self/status.
func selfUsage() Usage {
	var u Usage
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		u.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return u
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v) // "12345 kB"
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmHWM":
			u.PeakRSSKiB = n
		case "VmRSS":
			u.RSSKiB = n
		}
	}
	return u
}

// childAttr puts a replica in its own process group and has the kernel kill
// it when the benchmark dies.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
