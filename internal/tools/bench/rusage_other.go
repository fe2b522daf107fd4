//go:build !linux

package bench

import (
	"syscall"
	"time"
)

// Usage is what the kernel says this process has used.
type Usage struct {
	CPU        time.Duration
	PeakRSSKiB int64
	RSSKiB     int64
}

// selfUsage is only implemented on Linux; elsewhere it reports zeros.
func selfUsage() Usage { return Usage{} }

// childAttr puts a replica in its own process group.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
