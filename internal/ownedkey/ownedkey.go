// Package ownedkey gives back a key taken with SET NX and a random token:
// the key is deleted only while it still holds that token, so a holder whose
// key expired and was taken by someone else does not delete theirs. The
// limiter's ModeLocked site lock and the robots cache's fetch lease are both
// such keys.
package ownedkey

import (
	"context"
	_ "embed"

	"github.com/redis/go-redis/v9"
)

//go:embed delete.lua
var deleteLua string

var deleteScript = redis.NewScript(deleteLua)

// Delete deletes key if it still holds token, in one script call (EVALSHA,
// EVAL when Redis does not know the script). It reports whether it deleted
// the key; on failure it returns the error and the key may or may not be
// gone (it still expires when its TTL runs out).
func Delete(ctx context.Context, rdb redis.Scripter, key, token string) (bool, error) {
	n, err := deleteScript.Run(ctx, rdb, []string{key}, token).Int()
	return n == 1, err
}
