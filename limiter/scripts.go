package limiter

import (
	_ "embed"

	"github.com/polite-crawler/polite/internal/luafn"
	"github.com/polite-crawler/polite/internal/luanums"
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

	// lib is the scripts, run as one library of Redis Functions where the
	// server has them (luafn); every script's prelude is the server's
	// clock, the numbers argument (luanums), then common.lua and the
	// helpers any of them uses.
	lib = luafn.NewLibrary("polite_limiter", servertime.Lua+luanums.Lua+commonLua+youngLua+ceilingLua+adaptiveLua, map[string]string{
		"acquire": acquireLua, "check": checkLua, "release": releaseLua, "locked": lockedLua,
		"backoff": backoffLua, "status": statusLua,
	})

	acquireScript = lib.Script("acquire")
	checkScript   = lib.Script("check")
	releaseScript = lib.Script("release")
	lockedScript  = lib.Script("locked")
	backoffScript = lib.Script("backoff")
	statusScript  = lib.Script("status")
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
