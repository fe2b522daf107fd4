//go:build unix && !linux

package proc

import "syscall"

// sysProcAttr starts a child in its own process group. Outside Linux
// nothing kills a child whose parent was itself killed.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
