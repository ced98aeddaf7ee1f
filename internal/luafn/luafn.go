// Package luafn runs a package's Lua scripts on Redis as one library of
// Redis Functions (FCALL) where the server has them (Redis 7), and as plain
// scripts (EVALSHA, EVAL when the server lacks the script) where it does
// not: an embedded test server, an older Redis, a user the ACL denies
// FUNCTION.
//
// Why: a script's shared prelude (its helper functions) is compiled once
// but run on every EVALSHA, and creating its closures costs Redis more than
// some of the commands the script runs (about 13,000 instructions a call
// for the limiter's, against some 4,700 for a whole PING). A library runs
// its prelude once, when loaded; FCALL then only calls the function.
//
// The library's code is its prelude followed by one function per script,
// each the script's body run with KEYS and ARGV set:
//
//	#!lua name=<prefix>_<hash>
//	local KEYS, ARGV
//	local LIBRARY = true
//	local redis, string, tonumber, ... -- bound at the first call (see bound)
//	<prelude>
//	redis.register_function('<prefix>_<hash>_<script>', function(k, a)
//	  KEYS, ARGV = k, a
//	  <body>
//	end)
//
// so the prelude must be definitions only: at load time a library can call
// no global function (not even type or tonumber), and its top-level locals
// live from one call to the next, so a prelude keeps no state between calls.
// As a script the same prelude and body run with Redis's KEYS and ARGV, and
// LIBRARY false. A prelude may keep, in a top-level local, what stays true
// for as long as the library stays loaded on its server (until a restart,
// a full resync of a replica, FUNCTION FLUSH or RESTORE; loading other
// libraries leaves it), and tell by LIBRARY whether it does: as a script,
// a call is its whole life.
// The hash (of the library's code) names the library and its functions, so
// processes running different versions share a server without replacing
// each other's.
package luafn

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/polite-crawler/polite/internal/redisacl"
	"github.com/redis/go-redis/v9"
)

// How a Library runs on the servers of this process.
const (
	modeUnknown int32 = iota
	modeFunctions
	modeScripts
)

// Library is a package's scripts: one Redis Functions library, or the same
// code as scripts. Immutable.
type Library struct {
	name    string
	code    string
	scripts map[string]*Script
}

// Conn is a Library on one client's servers: how it runs there, settled
// by the first call. Safe for concurrent use.
type Conn struct {
	lib   *Library
	c     redis.Cmdable
	mode  atomic.Int32
	turn  chan struct{} // one load at a time while the mode is unknown (a 1-slot lock)
	after atomic.Int64  // unix ns before which a failed load is not tried again
}

// retryLoad is how long after a load failed for a reason that may pass
// (the server unreachable, loading, out of memory) the calls run as scripts
// before the load is tried again.
const retryLoad = time.Second

// On is the library on c's servers (one server, or a Cluster's masters
// when c is a *redis.ClusterClient).
func (l *Library) On(c redis.Cmdable) *Conn {
	return &Conn{lib: l, c: c, turn: make(chan struct{}, 1)}
}

// Script is one script of a Library.
type Script struct {
	fn     string        // its function's name
	script *redis.Script // the same code as a script
}

// NewLibrary is the library named prefix (letters, digits and '_') of the
// scripts bodies (name -> body), each run after prelude. It panics on a
// prefix or a script name Redis would not take as a function's name.
func NewLibrary(prefix, prelude string, bodies map[string]string) *Library {
	names := make([]string, 0, len(bodies))
	for n := range bodies {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range append([]string{prefix}, names...) {
		if n == "" || strings.Trim(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != "" {
			panic(fmt.Sprintf("luafn: %q is no function name", n))
		}
	}
	h := sha1.New()
	h.Write([]byte(boundLua + register)) // the wrapper's own code too
	h.Write([]byte(prelude))
	for _, n := range names {
		fmt.Fprintf(h, "\x00%s\x00%s", n, bodies[n])
	}
	name := prefix + "_" + hex.EncodeToString(h.Sum(nil)[:6])
	var b strings.Builder
	b.WriteString("#!lua name=" + name + "\nlocal KEYS, ARGV\nlocal LIBRARY = true\n" + boundLua + prelude)
	for _, n := range names {
		fmt.Fprintf(&b, register, name, n, bound, bodies[n])
	}
	l := &Library{name: name, code: b.String(), scripts: map[string]*Script{}}
	for _, n := range names {
		l.scripts[n] = &Script{fn: name + "_" + n, script: redis.NewScript("local LIBRARY = false\n" + prelude + "\n" + bodies[n])}
	}
	return l
}

// bound are the globals that a library reads as its own locals, bound to
// the globals at its functions' first call (boundLua): in a Redis 7 function
// a global is read from an empty table and then, through its metatable,
// from the real globals, two table reads where a local costs none; the
// scripts read redis.call, tonumber, string.sub and the like some 60 times
// a page, and binding them cut Redis's work a crawled page by some 2 %
// (callgrind, redis-replay). The library's top level runs where they are
// not yet bound (nil), as no global is there. Scripts read the globals as
// they are.
const bound = "redis, string, math, table, tonumber, tostring, type, ipairs, pairs, unpack, select"

// boundLua declares bound as the library's locals, after keeping the
// load-time redis (register_function) and a function that returns the
// globals of those names, called at run time.
const boundLua = "local load_api = redis\nlocal function runtime_globals() return " + bound + " end\nlocal " + bound + "\n"

// register is the code that registers a script's function: its name (the
// library's and the script's), bound, and its body.
const register = "\nload_api.register_function('%s_%s', function(k, a)\nif not redis then %s = runtime_globals() end\nKEYS, ARGV = k, a\n%s\nend)\n"

// Name is the library's name on the server.
func (l *Library) Name() string { return l.name }

// Script is the library's script name; it panics on a name not given to
// NewLibrary.
func (l *Library) Script(name string) *Script {
	s, ok := l.scripts[name]
	if !ok {
		panic("luafn: no script " + name + " in " + l.name)
	}
	return s
}

// Functions reports whether the library runs as functions on the
// servers, loading it there the first time it is asked. One load runs at a
// time; the callers that come meanwhile wait for its outcome (or their ctx)
// and run as scripts if it failed. A server that has no FUNCTION command,
// or whose ACL denies it to the user, runs the scripts, and is not asked
// again; so does one that cannot compile the library (a bug the package's
// tests catch). After any other failure (the server unreachable, loading,
// read-only, out of memory) the calls run as scripts, and the load is tried
// again a second later.
func (c *Conn) Functions(ctx context.Context) bool {
	switch c.mode.Load() {
	case modeFunctions:
		return true
	case modeScripts:
		return false
	}
	if time.Now().UnixNano() < c.after.Load() {
		return false
	}
	select {
	case c.turn <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	defer func() { <-c.turn }()
	if m := c.mode.Load(); m != modeUnknown || time.Now().UnixNano() < c.after.Load() {
		return m == modeFunctions
	}
	err := c.Load(ctx)
	switch {
	case err == nil:
		c.mode.Store(modeFunctions)
		return true
	case refused(err):
		c.mode.Store(modeScripts)
	default:
		c.after.Store(time.Now().Add(retryLoad).UnixNano())
	}
	return false
}

// refused: the server answered the load with an error that loading again
// will not change.
func refused(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := strings.ToLower(rerr.Error())
	for _, s := range []string{"unknown command", "unknown subcommand", "noperm", "error registering functions", "error compiling"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// Load loads the library on the server, on every master of a Cluster, or
// on every shard of a Ring; a server that has it already is left as it is.
func (c *Conn) Load(ctx context.Context) error {
	switch cc := c.c.(type) {
	case *redis.ClusterClient:
		return cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return c.lib.loadOn(ctx, n) })
	case *redis.Ring:
		var loaded atomic.Int32
		err := cc.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error {
			if err := c.lib.loadOn(ctx, n); err != nil {
				return err
			}
			loaded.Add(1)
			return nil
		})
		if err == nil && loaded.Load() == 0 {
			err = fmt.Errorf("luafn: load %s: no shard of the ring is up", c.lib.name)
		}
		return err
	}
	return c.lib.loadOn(ctx, c.c)
}

func (l *Library) loadOn(ctx context.Context, c redis.Cmdable) error {
	err := c.FunctionLoad(ctx, l.code).Err()
	if err != nil && strings.Contains(err.Error(), "already exists") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("luafn: load %s: %w", l.name, err)
	}
	return nil
}

// Missing reports whether err is a server's answer that it does not have
// the script or function: it restarted without it, was flushed of it, or is
// a Cluster master that joined after the library was loaded. Rerun runs
// it again.
// It also holds for an FCALL the server's ACL refuses the user (NOPERM)
// while it let the library load: the call did nothing either, and Rerun
// then runs the library as scripts from then on.
func Missing(err error) bool {
	return redis.HasErrorPrefix(err, "NOSCRIPT") || redis.HasErrorPrefix(err, "Function not found") || fcallRefused(err)
}

// fcallRefused: the ACL refused the user FCALL (or FCALL_RO).
func fcallRefused(err error) bool {
	what, cmd := redisacl.Refusal(err)
	return what == redisacl.Command && strings.HasPrefix(strings.ToLower(cmd), "fcall")
}

// Run runs the script on c's servers: FCALL when the library runs as
// functions there, else EVALSHA, or EVAL where the server does not have
// the script. A server that lost the library gets it again (Rerun).
func (s *Script) Run(ctx context.Context, c *Conn, keys []string, args ...any) *redis.Cmd {
	if !c.Functions(ctx) {
		return s.script.Run(ctx, c.c, keys, args...)
	}
	cmd := c.c.FCall(ctx, s.fn, keys, args...)
	if fcallRefused(cmd.Err()) {
		c.mode.Store(modeScripts) // for good (Rerun does the same after a pipeline)
		return s.script.Run(ctx, c.c, keys, args...)
	}
	if Missing(cmd.Err()) {
		return s.Rerun(ctx, c, keys, args...)
	}
	return cmd
}

// Rerun runs the script on c's servers after a call of it found it
// Missing: the library loaded again, then FCALL; or EVAL, where the
// library runs as scripts. Where the load fails, or the server still lacks
// the function (c reaches it through a client Load cannot load every node
// of), the script runs whole.
func (s *Script) Rerun(ctx context.Context, c *Conn, keys []string, args ...any) *redis.Cmd {
	if !c.Functions(ctx) {
		return s.script.Eval(ctx, c.c, keys, args...)
	}
	if err := c.Load(ctx); err != nil {
		// (A Cluster master down fails the load everywhere: this call's
		// own node may be up.)
		return s.script.Eval(ctx, c.c, keys, args...)
	}
	cmd := c.c.FCall(ctx, s.fn, keys, args...)
	if Missing(cmd.Err()) {
		if fcallRefused(cmd.Err()) {
			c.mode.Store(modeScripts) // for good, as when FUNCTION is refused
		}
		return s.script.Eval(ctx, c.c, keys, args...)
	}
	return cmd
}

// Queue queues the script on pipe (a pipeline of c's client), FCALL or
// EVALSHA as Run would choose. Its error after pipe runs may be Missing:
// then the call did nothing, and Rerun runs it again.
func (s *Script) Queue(ctx context.Context, c *Conn, pipe redis.Pipeliner, keys []string, args ...any) *redis.Cmd {
	if c.Functions(ctx) {
		return pipe.FCall(ctx, s.fn, keys, args...)
	}
	return s.script.EvalSha(ctx, pipe, keys, args...)
}

// Is reports whether cmd calls the script: FCALL of its function or
// EVALSHA of its SHA1 (for a hook that watches for it).
func (s *Script) Is(cmd redis.Cmder) bool {
	a := cmd.Args()
	if len(a) < 2 {
		return false
	}
	name, _ := a[0].(string)
	v, _ := a[1].(string)
	switch strings.ToLower(name) {
	case "fcall", "fcall_ro":
		return v == s.fn
	case "evalsha", "evalsha_ro":
		return v == s.script.Hash()
	}
	return false
}

// Slotless reports whether c's keys stay on one server while in use: a
// single node (a *redis.Client, Sentinel's failover client included) or a
// *redis.Ring, which places a key by its hash tag and never moves it. A
// script there may be given one key and make the names of the others in
// its hash tag itself, saving Redis a string a key. On a Redis Cluster (or
// a client this package does not know) it must be given every key it
// touches: while a slot migrates, Redis keeps a script from running half
// on either node (TRYAGAIN) only for the keys it declares.
func Slotless(c redis.Cmdable) bool {
	switch c.(type) {
	case *redis.Client, *redis.Ring:
		return true
	}
	return false
}
