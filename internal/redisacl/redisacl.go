// Package redisacl recognises Redis refusing a user a command, a key or a
// channel by its ACL, and says what to change.
package redisacl

import (
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// What was refused (Refusal).
const (
	None    = ""        // not a refusal
	Command = "command" // a command (or a subcommand)
	Key     = "key"     // a key
	Channel = "channel" // a pub/sub channel
)

// Refusal reports what Redis's ACL refused in err (or an error it wraps):
// None for anything else. It knows a NOPERM reply ("this user has no
// permissions to run the 'x' command", "... to access one of the keys /
// channels ...", and Redis 7.2's "No permissions to access a key") and a
// script's error for a call the ACL refused inside it ("The user executing
// the script can't run this command", "... can't access at least one of
// the keys", "... can't publish to the channel"). cmd is the refused
// command's name when the reply gives it.
func Refusal(err error) (what, cmd string) {
	var re redis.Error
	if err == nil || !errors.As(err, &re) {
		return None, ""
	}
	msg := re.Error()
	script := strings.Contains(msg, "The user executing the script can't")
	if !script && !redis.HasErrorPrefix(re, "NOPERM") {
		return None, ""
	}
	switch {
	case strings.Contains(msg, "channel"):
		return Channel, ""
	case strings.Contains(msg, "of the keys") || strings.Contains(msg, "access a key"):
		return Key, ""
	}
	if i := strings.Index(msg, "to run the '"); i >= 0 {
		rest := msg[i+len("to run the '"):]
		if j := strings.IndexByte(rest, '\''); j >= 0 {
			return Command, rest[:j]
		}
	}
	return Command, ""
}

// Refused reports whether err is a refusal of Redis's ACL (Refusal).
func Refused(err error) bool {
	what, _ := Refusal(err)
	return what != None
}

// Hint names what the Redis user lacks when err is an ACL refusal, for
// keys and channels under prefix: "" for any other error.
func Hint(err error, prefix string) string {
	switch what, cmd := Refusal(err); what {
	case Key:
		return "the Redis user may not use keys under --prefix " + prefix + " (ACL: ~" + prefix + ":*)"
	case Channel:
		return "the Redis user may not use the channels under --prefix " + prefix + " (ACL: &" + prefix + ":*)"
	case Command:
		if cmd == "" {
			return "the Redis user may not run a command the crawler's scripts use (ACL: +@all -@dangerous +info, as README shows)"
		}
		return "the Redis user may not run " + strings.ToUpper(cmd) + " (ACL: +@all -@dangerous +info, as README shows)"
	}
	return ""
}
