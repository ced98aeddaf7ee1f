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
// None for anything else. It knows a NOPERM reply (Redis 7.0: "this user
// has no permissions to run the 'x' command", "... to access one of the
// keys / channels used as arguments"; 7.2 on: "User u has no permissions
// to run the 'x' command", "No permissions to access a key / channel") and
// the error of a script whose call the ACL refused (7.0: "The user
// executing the script can't run this command", "... can't access at
// least one of the keys", "... can't publish to the channel"; 7.2 on: "ACL
// failure in script: " and the NOPERM text). cmd is the refused command's
// name when the reply gives it.
func Refusal(err error) (what, cmd string) {
	var re redis.Error
	if err == nil || !errors.As(err, &re) {
		return None, ""
	}
	msg := re.Error()
	if !redis.HasErrorPrefix(re, "NOPERM") && !strings.Contains(msg, "The user executing the script can't") &&
		!strings.Contains(msg, "ACL failure in script") {
		return None, ""
	}
	// The command first: from 7.2 on its message names the user, whose
	// name may hold "channel" or "key".
	if i := strings.Index(msg, "permissions to run the '"); i >= 0 {
		rest := msg[i+len("permissions to run the '"):]
		if j := strings.IndexByte(rest, '\''); j >= 0 {
			return Command, rest[:j]
		}
		return Command, ""
	}
	for _, p := range []string{"one of the channels", "access a channel", "publish to the channel"} {
		if strings.Contains(msg, p) {
			return Channel, ""
		}
	}
	for _, p := range []string{"one of the keys", "access a key"} {
		if strings.Contains(msg, p) {
			return Key, ""
		}
	}
	return Command, "" // "can't run this command or subcommand" (7.0), or a text this package does not know
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
			return "the Redis user may not run a command the crawler's scripts use (ACL LOG on the server names it; a crawling user: +@all -@dangerous +info, as README shows)"
		}
		return "the Redis user may not run " + strings.ToUpper(cmd) + " (ACL: +" + strings.ToLower(cmd) + "; a crawling user: +@all -@dangerous +info, as README shows)"
	}
	return ""
}
