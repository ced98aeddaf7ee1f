// Package redisinfo reads the text of a Redis INFO reply ("field:value"
// lines under "# Section" headers), so that every caller reads it one way.
package redisinfo

import "strings"

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
