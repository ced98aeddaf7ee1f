//go:build !linux

package bench

import "errors"

// pinRedis needs Linux's sched_setaffinity: elsewhere it fails, and the
// crawls it serves are left out of the report with the reason.
func pinRedis(int) (func() error, error) {
	return nil, errors.New("bench: pin: giving Redis a CPU of its own needs Linux")
}
