//go:build !linux

package reliability

import "syscall"

// sysProcAttr puts a child in its own process group; without Pdeathsig the
// test's cleanup is what kills it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
