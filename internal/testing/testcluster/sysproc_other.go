//go:build unix && !linux

package testcluster

import "syscall"

// sysProcAttr puts a child in its own process group so it and anything it
// spawns can be signalled together. Only Linux can also tie the child's
// lifetime to the test binary; elsewhere a killed test binary can leave
// etcd and kube-apiserver running.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
