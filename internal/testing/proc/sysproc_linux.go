package proc

import "syscall"

// sysProcAttr starts a child in its own process group and has the kernel
// SIGKILL it when the thread that started it exits. Go does not retire
// threads that are not locked with runtime.LockOSThread, so in practice the
// child dies with the parent, even when the parent is killed.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
