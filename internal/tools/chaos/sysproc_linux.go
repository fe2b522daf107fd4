package chaos

import "syscall"

// sysProcAttr puts a meshd process in its own process group, so that a
// SIGKILL reaches all of it, and has the kernel SIGKILL it when the thread
// that started it exits. Go does not retire threads that are not locked with
// runtime.LockOSThread, so in practice it dies with the chaos run, even when
// that is killed.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
