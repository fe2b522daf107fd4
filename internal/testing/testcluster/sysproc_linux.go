package testcluster

import "syscall"

// sysProcAttr puts a child in its own process group, so it and anything it
// spawns can be signalled together, and asks the kernel to SIGKILL it when
// the thread that started it exits. Go does not retire threads that are not
// locked with runtime.LockOSThread, so in practice the child dies with the
// test binary, even when that binary is killed.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
