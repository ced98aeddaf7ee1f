//go:build !linux

package redistest

import "syscall"

// procAttr starts the server in a process group of its own, so a signal to
// the test binary's group does not race our orderly shutdown. (Only Linux
// also kills it when its owner dies.)
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
