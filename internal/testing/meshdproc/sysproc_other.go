//go:build unix && !linux

package meshdproc

import "syscall"

// sysProcAttr starts a child in its own process group, so a terminal's
// Ctrl-C reaches only the parent. Outside Linux nothing kills children that
// outlive a parent that was itself killed.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
