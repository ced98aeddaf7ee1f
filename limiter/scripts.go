package limiter

import (
	_ "embed"

	"github.com/redis/go-redis/v9"

	"github.com/polite-crawler/polite/internal/servertime"
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
	//go:embed young.lua
	youngLua string
	//go:embed locked.lua
	lockedLua string
	//go:embed ceiling.lua
	ceilingLua string
	//go:embed adaptive.lua
	adaptiveLua string
	//go:embed backoff.lua
	backoffLua string
	//go:embed status.lua
	statusLua string

	// prelude starts every script: the server's clock, then common.lua.
	prelude = servertime.Lua + commonLua

	acquireScript = redis.NewScript(prelude + youngLua + ceilingLua + adaptiveLua + acquireLua)
	checkScript   = redis.NewScript(prelude + ceilingLua + adaptiveLua + checkLua)
	releaseScript = redis.NewScript(prelude + ceilingLua + adaptiveLua + releaseLua)
	lockedScript  = redis.NewScript(prelude + youngLua + ceilingLua + adaptiveLua + lockedLua)
	backoffScript = redis.NewScript(prelude + backoffLua)
	statusScript  = redis.NewScript(prelude + statusLua)
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
