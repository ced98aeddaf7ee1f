package luafn

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/polite-crawler/polite/internal/redisinfo"
	"github.com/polite-crawler/polite/internal/redistest"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

// A prelude of definitions only, and two scripts using it and KEYS/ARGV.
const prelude = `
local function twice(x)
  return 2 * tonumber(x)
end
`

func testLib() *Library {
	return NewLibrary("luafn_test", prelude, map[string]string{
		"set":     "redis.call('SET', KEYS[1], twice(ARGV[1]))\nreturn redis.call('GET', KEYS[1])",
		"argc":    "return {#KEYS, #ARGV}",
		"nothing": "return 0",
	})
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// calls is how many times Redis ran each of cmds since stats were reset.
func calls(t *testing.T, ctx context.Context, rdb *redis.Client, cmds ...string) map[string]int {
	t.Helper()
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, c := range cmds {
		if v, ok := redisinfo.Field(info, "cmdstat_"+c); ok {
			n, _ := strconv.Atoi(strings.TrimPrefix(strings.Split(v, ",")[0], "calls="))
			got[c] = n
		}
	}
	return got
}

// ownServer is a redis-server of the test's own (it changes the server's
// configuration or ACL), its admin client, and a client of the user made
// there by ACL SETUSER with rules (user, password pw, all keys and
// channels, all commands, then rules).
func ownServer(t *testing.T, ctx context.Context, user string, rules ...any) (admin, as *redis.Client) {
	t.Helper()
	own, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(own.Close)
	admin = own.Client()
	t.Cleanup(func() { admin.Close() })
	if as, err = own.ClientAs(ctx, user, rules...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { as.Close() })
	return admin, as
}

func TestFunctionsOnRedis(t *testing.T) {
	ctx := ctxT(t)
	rdb := srv.Client()
	defer rdb.Close()
	rdb.FunctionFlush(ctx)
	lib := testLib()
	fn := lib.On(rdb)
	if !strings.HasPrefix(lib.Name(), "luafn_test_") || len(lib.Name()) != len("luafn_test_")+12 {
		t.Fatalf("library name %q", lib.Name())
	}
	if !fn.Functions(ctx) {
		t.Fatal("redis-server does not run the library as functions")
	}
	libs, err := rdb.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: lib.Name()}).Result()
	if err != nil || len(libs) != 1 || len(libs[0].Functions) != 3 {
		t.Fatalf("FUNCTION LIST: %v %v, want the library with 3 functions", libs, err)
	}
	rdb.ConfigResetStat(ctx)
	if v, err := lib.Script("set").Run(ctx, fn, []string{"k"}, "21").Text(); err != nil || v != "42" {
		t.Fatalf("set: %q %v, want 42", v, err)
	}
	if v, err := lib.Script("argc").Run(ctx, fn, []string{"a", "b"}, 1, 2, 3).Int64Slice(); err != nil || len(v) != 2 || v[0] != 2 || v[1] != 3 {
		t.Fatalf("argc: %v %v, want [2 3]", v, err)
	}
	if c := calls(t, ctx, rdb, "fcall", "evalsha", "eval"); c["fcall"] != 2 || c["evalsha"]+c["eval"] != 0 {
		t.Fatalf("commands run: %v, want 2 FCALLs and no script", c)
	}
	// The same code is the same library: loading it again changes nothing.
	if err := testLib().On(rdb).Load(ctx); err != nil {
		t.Fatal(err)
	}
	// Other code is another library, beside it.
	other := NewLibrary("luafn_test", prelude, map[string]string{"nothing": "return 1"})
	if other.Name() == lib.Name() {
		t.Fatal("two libraries of different code share a name")
	}
	if v, err := other.Script("nothing").Run(ctx, other.On(rdb), nil).Int(); err != nil || v != 1 {
		t.Fatalf("the other library: %v %v, want 1", v, err)
	}
	if v, err := lib.Script("nothing").Run(ctx, fn, nil).Int(); err != nil || v != 0 {
		t.Fatalf("the first library beside the other: %v %v, want 0", v, err)
	}
}

// A server that lost the library (restarted without persistence, FUNCTION
// FLUSH): a queued call finds it Missing, and Run loads it again.
func TestFunctionsLost(t *testing.T) {
	ctx := ctxT(t)
	rdb := srv.Client()
	defer rdb.Close()
	lib := testLib()
	fn := lib.On(rdb)
	if !fn.Functions(ctx) {
		t.Fatal("not functions")
	}
	rdb.FunctionFlush(ctx)
	rdb.Del(ctx, "lost:k") // an earlier run's (go test -count=N)
	pipe := rdb.Pipeline()
	get := pipe.Get(ctx, "lost:k")
	cmd := lib.Script("set").Queue(ctx, fn, pipe, []string{"lost:k"}, "2")
	pipe.Exec(ctx)
	if !Missing(cmd.Err()) || !strings.Contains(cmd.String(), "fcall") {
		t.Fatalf("queued call on a flushed server: %v, want Missing", cmd)
	}
	if get.Err() != redis.Nil {
		t.Fatalf("the pipeline's other command: %v", get.Err())
	}
	rdb.ConfigResetStat(ctx)
	if v, err := lib.Script("set").Rerun(ctx, fn, []string{"lost:k"}, "2").Text(); err != nil || v != "4" {
		t.Fatalf("Rerun after the flush: %q %v, want 4", v, err)
	}
	if c := calls(t, ctx, rdb, "fcall", "function|load"); c["fcall"] != 1 || c["function|load"] != 1 {
		t.Fatalf("commands run: %v; want the library loaded and one FCALL", c)
	}
	rdb.FunctionFlush(ctx)
	if v, err := lib.Script("set").Run(ctx, fn, []string{"lost:k"}, "3").Text(); err != nil || v != "6" {
		t.Fatalf("Run after the flush: %q %v, want 6", v, err)
	}
	if v, err := lib.Script("set").Queue(ctx, fn, rdb.Pipeline(), nil).Result(); v != nil || err != nil {
		t.Fatalf("an unexecuted queued call: %v %v", v, err)
	}
	if Missing(nil) || Missing(redis.Nil) {
		t.Fatal("no error, or redis.Nil, Missing")
	}
}

// Where the server has no Functions (miniredis, an older Redis), the same
// code runs as scripts, and a server that lost them runs them whole.
func TestScriptsWithoutFunctions(t *testing.T) {
	ctx := ctxT(t)
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	lib := testLib()
	fn := lib.On(rdb)
	if fn.Functions(ctx) {
		t.Fatal("miniredis runs functions?")
	}
	if fn.mode.Load() != modeScripts {
		t.Fatal("not settled on scripts: every call would ask again")
	}
	if v, err := lib.Script("set").Run(ctx, fn, []string{"k"}, "5").Text(); err != nil || v != "10" {
		t.Fatalf("set: %q %v, want 10", v, err)
	}
	rdb.ScriptFlush(ctx)
	pipe := rdb.Pipeline()
	cmd := lib.Script("argc").Queue(ctx, fn, pipe, []string{"a"}, 1)
	pipe.Exec(ctx)
	if !Missing(cmd.Err()) {
		t.Fatalf("queued EVALSHA of a flushed script: %v, want Missing", cmd.Err())
	}
	if v, err := lib.Script("argc").Run(ctx, fn, []string{"a"}, 1).Int64Slice(); err != nil || v[0] != 1 || v[1] != 1 {
		t.Fatalf("argc: %v %v", v, err)
	}
	// The same library, in the same process, on a server that has Functions.
	real := srv.Client()
	defer real.Close()
	if !lib.On(real).Functions(ctx) {
		t.Fatal("one server without Functions made the library scripts on another")
	}
}

// Every global a library binds as a local (bound) is the global at run
// time, from the prelude's functions and from a body, as functions and as
// scripts; a global not bound reads as before.
func TestBoundGlobals(t *testing.T) {
	ctx := ctxT(t)
	rdb := srv.Client()
	defer rdb.Close()
	lib := NewLibrary("luafn_test_bound", `
local function sorted(xs)
  local t = {}
  for i, v in ipairs(xs) do t[i] = v end
  table.sort(t)
  return table.concat(t, '')
end
`, map[string]string{"all": `
local n = 0
for _ in pairs({a = 1, b = 2}) do n = n + 1 end
return table.concat({redis.call('ECHO', KEYS[1]), string.upper(ARGV[1]), tostring(math.max(tonumber('4'), 2)),
  type(n), sorted({3, 1, 2}), tostring(n), tostring(select('#', unpack({1, 2, 3}))), type(cjson)}, ',')`})
	const want = "k,S,4,number,123,2,3,table"
	fn := lib.On(rdb)
	if !fn.Functions(ctx) {
		t.Fatal("the library did not load as functions")
	}
	for i := 0; i < 2; i++ { // the first call binds, the second finds them bound
		if v, err := lib.Script("all").Run(ctx, fn, []string{"k"}, "s").Text(); err != nil || v != want {
			t.Fatalf("as a function, call %d: %q %v, want %q", i+1, v, err, want)
		}
	}
	if v, err := lib.Script("all").script.Run(ctx, rdb, []string{"k"}, "s").Text(); err != nil || v != want {
		t.Fatalf("as a script: %q %v, want %q", v, err, want)
	}
}

// A server that does not answer leaves the question open: the call runs as
// a script (and fails), and the next asks again.
func TestFunctionsUnreachable(t *testing.T) {
	ctx := ctxT(t)
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second})
	defer dead.Close()
	fn := testLib().On(dead)
	if fn.Functions(ctx) {
		t.Fatal("functions on no server")
	}
	if fn.mode.Load() != modeUnknown {
		t.Fatal("an unreachable server settled the mode")
	}
	if err := testLib().Script("nothing").Run(ctx, fn, nil).Err(); err == nil {
		t.Fatal("a call to no server did not fail")
	}
	if fn.mode.Load() != modeUnknown {
		t.Fatal("an unreachable server settled the mode")
	}
}

// A server that refuses the load for now (over maxmemory) leaves the
// question open; one whose ACL denies FUNCTION settles on scripts, which
// run there, and run whole again where the server lost them.
func TestFunctionsRefusedForNowOrForGood(t *testing.T) {
	ctx := ctxT(t)
	rdb, user := ownServer(t, ctx, "nofn", "-function")
	if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	fn := testLib().On(rdb)
	if fn.Functions(ctx) || fn.mode.Load() != modeUnknown {
		t.Fatalf("over maxmemory: functions %v, mode %d; want scripts for now, unknown", fn.Functions(ctx), fn.mode.Load())
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	rdb.ConfigResetStat(ctx)
	if fn.Functions(ctx) || fn.Functions(ctx) {
		t.Fatal("a load that failed was tried again at once")
	}
	if c := calls(t, ctx, rdb, "function|load"); c["function|load"] != 0 {
		t.Fatalf("%d loads within a second of the failed one", c["function|load"])
	}
	fn.after.Store(0) // a second later
	if !fn.Functions(ctx) {
		t.Fatal("not asked again once the server had room")
	}

	lib := testLib()
	ufn := lib.On(user)
	if ufn.Functions(ctx) || ufn.mode.Load() != modeScripts {
		t.Fatal("a user denied FUNCTION did not settle on scripts")
	}
	rdb.ConfigResetStat(ctx)
	if v, err := lib.Script("set").Run(ctx, ufn, []string{"acl:k"}, "4").Text(); err != nil || v != "8" {
		t.Fatalf("as a script: %q %v, want 8", v, err)
	}
	rdb.ScriptFlush(ctx)
	if v, err := lib.Script("set").Rerun(ctx, ufn, []string{"acl:k"}, "5").Text(); err != nil || v != "10" {
		t.Fatalf("rerun as a script: %q %v, want 10", v, err)
	}
	if c := calls(t, ctx, rdb, "fcall", "evalsha", "eval"); c["fcall"] != 0 || c["eval"] != 2 || c["evalsha"] != 1 {
		t.Fatalf("commands run: %v; want EVALSHA (NOSCRIPT), EVAL, then Rerun's EVAL", c)
	}
}

// A server that cannot be given the library again when a call finds it
// gone (here the ACL denies the load; on a Cluster, another master down
// fails it) runs the call as a script: it did nothing, and its own node
// may well be up.
func TestRerunWhenTheLoadFails(t *testing.T) {
	ctx := ctxT(t)
	_, user := ownServer(t, ctx, "noload", "-function|load")
	lib := testLib()
	fn := lib.On(user)
	fn.mode.Store(modeFunctions) // settled while the library was there
	if v, err := lib.Script("set").Rerun(ctx, fn, []string{"k"}, "6").Text(); err != nil || v != "12" {
		t.Fatalf("rerun with the load refused: %q %v, want 12 (the script whole)", v, err)
	}
}

// A prelude that reads a global at its top level cannot be a library: the
// server refuses it, and the scripts run as scripts.
func TestPreludeWithGlobalsRunsAsScripts(t *testing.T) {
	ctx := ctxT(t)
	rdb := srv.Client()
	defer rdb.Close()
	lib := NewLibrary("luafn_test_bad", "local n = tonumber('1')\n", map[string]string{"n": "return n"})
	fn := lib.On(rdb)
	if fn.Functions(ctx) || fn.mode.Load() != modeScripts {
		t.Fatal("a library reading a global at load ran as functions")
	}
	if v, err := lib.Script("n").Run(ctx, fn, nil).Int(); err != nil || v != 1 {
		t.Fatalf("as a script: %v %v, want 1", v, err)
	}
}

func TestIs(t *testing.T) {
	ctx := context.Background()
	lib := testLib()
	set, argc := lib.Script("set"), lib.Script("argc")
	pipe := redis.NewClient(&redis.Options{}).Pipeline()
	fcall := pipe.FCall(ctx, set.fn, []string{"k"}, 1)
	evalsha := set.script.EvalSha(ctx, pipe, []string{"k"}, 1)
	if !set.Is(fcall) || !set.Is(evalsha) || argc.Is(fcall) || argc.Is(evalsha) {
		t.Fatal("Is does not tell the script's FCALL and EVALSHA from another's")
	}
	if set.Is(pipe.Get(ctx, set.fn)) || set.Is(pipe.Ping(ctx)) {
		t.Fatal("Is took another command for the script")
	}
}

func TestBadNames(t *testing.T) {
	for _, n := range []string{"", "a-b", "a b", "é"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("script name %q accepted", n)
				}
			}()
			NewLibrary("ok", "", map[string]string{n: "return 1"})
		}()
	}
	defer func() {
		if recover() == nil {
			t.Error("Script of an unknown name did not panic")
		}
	}()
	testLib().Script("none")
}

// Only clients whose keys never move may name a script's keys from one.
func TestSlotless(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	r := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer r.Close()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer cc.Close()
	if !Slotless(c) || !Slotless(r) {
		t.Error("a single node or a Ring counted as keys that move")
	}
	if Slotless(cc) {
		t.Error("a Cluster counted as keys that never move")
	}
	var u redis.UniversalClient = cc
	if Slotless(u) {
		t.Error("a Cluster behind an interface counted as keys that never move")
	}
}

// A user the ACL lets load functions but not FCALL them (-fcall) runs the
// library as scripts: the first call, refused, runs again as a script and
// settles the library on scripts, so later calls and pipelines use
// EVALSHA, which the user may run.
func TestFcallRefusedRunsAsScripts(t *testing.T) {
	ctx := ctxT(t)
	_, as := ownServer(t, ctx, "nofcall", "-fcall", "-fcall_ro")
	lib := testLib()
	fn := lib.On(as)
	if v, err := lib.Script("set").Run(ctx, fn, []string{"k"}, "5").Text(); err != nil || v != "10" {
		t.Fatalf("set: %q %v, want 10", v, err)
	}
	if fn.Functions(ctx) {
		t.Fatal("still running as functions after FCALL was refused")
	}
	pipe := as.Pipeline()
	cmd := lib.Script("argc").Queue(ctx, fn, pipe, []string{"a"}, 1)
	pipe.Exec(ctx)
	if err := cmd.Err(); Missing(err) {
		cmd = lib.Script("argc").Rerun(ctx, fn, []string{"a"}, 1)
	}
	if v, err := cmd.Int64Slice(); err != nil || v[0] != 1 || v[1] != 1 {
		t.Fatalf("argc: %v %v", v, err)
	}
}
