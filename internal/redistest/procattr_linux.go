package redistest

import "syscall"

// procAttr starts the server in a process group of its own, so a signal to
// the test binary's group does not race our orderly shutdown, and has the
// kernel kill it when the process that started it dies without closing it
// (a test binary that panicked past its cleanup, a killed bench): no
// redis-server outlives its owner. (Pdeathsig follows the thread that
// started the server; Go ends a thread only when a goroutine locked to it
// exits, which nothing here does.)
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
