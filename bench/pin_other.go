//go:build !linux

package bench

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// pinRedis needs Linux's sched_setaffinity: elsewhere it fails, and the
// crawls it serves are left out of the report with the reason.
func pinRedis(context.Context, *redis.Client, string) (func() error, error) {
	return nil, errors.New("bench: pin: giving Redis a CPU of its own needs Linux")
}
