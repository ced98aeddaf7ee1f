// Package servertime is the Redis server's clock for Lua scripts: the
// limiter and the frontier take every time from Redis TIME, so that workers
// whose clocks disagree still agree on the order of events.
package servertime

import _ "embed"

// Lua defines server_ms() (the server time in ms, rounded down and up, then
// TIME's reply), now_ms() (rounded down, then TIME's reply) and ms_text(t)
// (TIME's reply t in ms rounded down, as text for a command). The reply
// comes last so that `local now = now_ms()` reads the time alone; a call
// last in an argument list passes it too: wrap it in parentheses. Prepend
// it to a script that uses them.
//
//go:embed servertime.lua
var Lua string
