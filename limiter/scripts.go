package limiter

import (
	_ "embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed common.lua
	commonLua string
	//go:embed acquire.lua
	acquireLua string
	//go:embed check.lua
	checkLua string
	//go:embed release.lua
	releaseLua string
	//go:embed unlock.lua
	unlockLua string
	//go:embed time.lua
	timeLua string
	//go:embed young.lua
	youngLua string
	//go:embed locked.lua
	lockedLua string

	// timeYoungLua is sent whole with EVAL in ModeLocked's first pipelined
	// round trip (a pipeline cannot fall back from EVALSHA), so without the
	// comments.
	timeYoungLua = code(youngLua + timeLua)

	acquireScript = redis.NewScript(commonLua + youngLua + acquireLua)
	checkScript   = redis.NewScript(commonLua + checkLua)
	releaseScript = redis.NewScript(commonLua + releaseLua)
	lockedScript  = redis.NewScript(commonLua + lockedLua)
)

// Script states, as the scripts return them.
const (
	stGranted   = 1
	stQueued    = 2
	stBusy      = 3
	stContended = 4
	stLost      = 5
	stYoung     = 6
)

// code is a Lua source without its comment lines and blank lines.
func code(src string) string {
	var b strings.Builder
	for line := range strings.Lines(src) {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "--") {
			b.WriteString(line)
		}
	}
	return b.String()
}
