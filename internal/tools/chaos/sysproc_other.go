//go:build !linux

package chaos

import "syscall"

// sysProcAttr puts a meshd process in its own process group. Without
// Pdeathsig outside Linux, a chaos run that is killed leaves it running.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
