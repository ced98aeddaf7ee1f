package redisacl_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/polite-crawler/polite/internal/redisacl"
	"github.com/polite-crawler/polite/internal/redistest"
)

// Each refusal Redis 7 answers, to a command or inside a script, is told
// apart by what it refused, wrapped or not; other errors are no refusal.
func TestRefusalOnRedis(t *testing.T) {
	ctx := context.Background()
	srv, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rdb, err := srv.ClientAs(ctx, "narrow", "resetkeys", "~ok:*", "resetchannels", "-time")
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	script := func(body string, keys ...string) error {
		return rdb.Eval(ctx, body, keys).Err()
	}
	if err := rdb.Set(ctx, "ok:s", "x", 0).Err(); err != nil { // INCR of it: an error, not a refusal
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		err       error
		what, cmd string
	}{
		{"a key", rdb.Get(ctx, "no:k").Err(), redisacl.Key, ""},
		{"a channel", rdb.Publish(ctx, "ch", "x").Err(), redisacl.Channel, ""},
		{"a command", rdb.Time(ctx).Err(), redisacl.Command, "time"},
		{"a key in a script", script("return redis.call('GET', 'no:k')"), redisacl.Key, ""},
		{"a channel in a script", script("return redis.call('PUBLISH', 'ch', 'x')"), redisacl.Channel, ""},
		{"a command in a script", script("return redis.call('TIME')"), redisacl.Command, ""},
		{"wrapped", fmt.Errorf("limiter: acquire: %w", rdb.Get(ctx, "no:k").Err()), redisacl.Key, ""},
		{"another error", script("return redis.call('INCR', KEYS[1])", "ok:s"), redisacl.None, ""},
		{"not Redis's", errors.New("NOPERM made up"), redisacl.None, ""},
		{"none", nil, redisacl.None, ""},
	} {
		what, cmd := redisacl.Refusal(c.err)
		if what != c.what || cmd != c.cmd || redisacl.Refused(c.err) != (c.what != redisacl.None) {
			t.Errorf("%s: Refusal(%v) = %q, %q; want %q, %q", c.name, c.err, what, cmd, c.what, c.cmd)
		}
		if hint := redisacl.Hint(c.err, "p"); (hint == "") != (c.what == redisacl.None) {
			t.Errorf("%s: Hint(%v) = %q", c.name, c.err, hint)
		}
	}
}

// The texts of Redis 7.2 and later (getAclErrorMessage, and "ACL failure
// in script: " before it inside a script), which the installed 7.0 does
// not answer, and texts that only look like refusals.
func TestRefusalTexts(t *testing.T) {
	for _, c := range []struct {
		msg       string
		what, cmd string
	}{
		{"NOPERM User channel-bot has no permissions to run the 'fcall' command", redisacl.Command, "fcall"},
		{"NOPERM User keymaster has no permissions to run the 'time' command", redisacl.Command, "time"},
		{"NOPERM No permissions to access a key", redisacl.Key, ""},
		{"NOPERM No permissions to access a channel", redisacl.Channel, ""},
		{"ERR ACL failure in script: No permissions to access a key script: 5e6c0a1b, on @user_script:1.", redisacl.Key, ""},
		{"ERR ACL failure in script: No permissions to access a channel script: 5e6c0a1b, on @user_script:1.", redisacl.Channel, ""},
		{"ERR ACL failure in script: User u has no permissions to run the 'time' command script: polite_frontier_x_meta, on @user_function:18.", redisacl.Command, "time"},
		{"NOPERM this user has no permissions to run the 'pubsub|channels' command", redisacl.Command, "pubsub|channels"},
		{"ERR The user executing the script can't run this command or subcommand script: f, on @user_function:18.", redisacl.Command, ""},
		{"ERR user_script:1: Script attempted to access nonexistent global variable 'channel'", redisacl.None, ""},
		{"WRONGTYPE Operation against a key holding the wrong kind of value", redisacl.None, ""},
	} {
		what, cmd := redisacl.Refusal(replyErr(c.msg))
		if what != c.what || cmd != c.cmd {
			t.Errorf("Refusal(%q) = %q, %q; want %q, %q", c.msg, what, cmd, c.what, c.cmd)
		}
	}
}

// replyErr is an error reply as go-redis returns one.
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

func ExampleHint() {
	err := fmt.Errorf("seeding: %w", replyErr("NOPERM this user has no permissions to access one of the keys used as arguments"))
	fmt.Println(redisacl.Hint(err, "polite"))
	// Output: the Redis user may not use keys under --prefix polite (ACL: ~polite:*)
}
