// Package redisinfo reads the text of a Redis INFO reply ("field:value"
// lines under "# Section" headers), so that every caller reads it one way.
package redisinfo

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Field returns the value of the field name in an INFO reply, and whether
// the reply has it.
func Field(info, name string) (string, bool) {
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// Fields returns every field of an INFO reply with its value.
func Fields(info string) map[string]string {
	f := map[string]string{}
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && !strings.HasPrefix(k, "#") {
			f[k] = v
		}
	}
	return f
}

// Uptime returns the server's uptime_in_seconds from an INFO reply (its
// "server" section). ok is false when the reply has no such field; err is
// set when it has one that is not a whole number of seconds.
func Uptime(info string) (up time.Duration, ok bool, err error) {
	v, ok := Field(info, "uptime_in_seconds")
	if !ok {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, true, fmt.Errorf("uptime %q: %w", v, err)
	}
	return time.Duration(n) * time.Second, true, nil
}
