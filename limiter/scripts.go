package limiter

import (
	_ "embed"

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

	acquireScript = redis.NewScript(commonLua + youngLua + ceilingLua + adaptiveLua + acquireLua)
	checkScript   = redis.NewScript(commonLua + ceilingLua + adaptiveLua + checkLua)
	releaseScript = redis.NewScript(commonLua + ceilingLua + adaptiveLua + releaseLua)
	lockedScript  = redis.NewScript(commonLua + youngLua + ceilingLua + adaptiveLua + lockedLua)
	backoffScript = redis.NewScript(commonLua + backoffLua)
	statusScript  = redis.NewScript(commonLua + statusLua)
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
