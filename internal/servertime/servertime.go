// Package servertime is the Redis server's clock for Lua scripts: the
// limiter and the frontier take every time from Redis TIME, so that workers
// whose clocks disagree still agree on the order of events.
package servertime

import _ "embed"

// Lua defines server_ms() (the server time in ms, rounded down and up) and
// now_ms() (rounded down). Prepend it to a script that uses them.
//
//go:embed servertime.lua
var Lua string
