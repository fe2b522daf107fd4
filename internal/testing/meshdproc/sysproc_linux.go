package meshdproc

import "syscall"

// sysProcAttr starts a child in its own process group, so a terminal's
// Ctrl-C reaches only the parent, and has the kernel SIGKILL it when the
// thread that started it exits. Go keeps threads that are not locked with
// runtime.LockOSThread, so in practice the child dies with the parent.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
