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
//	<prelude>
//	redis.register_function('<prefix>_<hash>_<script>', function(k, a)
//	  KEYS, ARGV = k, a
//	  <body>
//	end)
//
// so the prelude must be definitions only: at load time a library can call
// no global function (not even type or tonumber), and its top-level locals
// live from one call to the next, so a prelude keeps no state between calls.
// As a script the same prelude and body run with Redis's KEYS and ARGV.
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
	lib  *Library
	c    redis.Cmdable
	mode atomic.Int32
}

// On is the library on c's servers (one server, or a Cluster's masters
// when c is a *redis.ClusterClient).
func (l *Library) On(c redis.Cmdable) *Conn {
	return &Conn{lib: l, c: c}
}

// Script is one script of a Library.
type Script struct {
	lib    *Library
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
	h.Write([]byte(prelude))
	for _, n := range names {
		fmt.Fprintf(h, "\x00%s\x00%s", n, bodies[n])
	}
	name := prefix + "_" + hex.EncodeToString(h.Sum(nil)[:6])
	var b strings.Builder
	b.WriteString("#!lua name=" + name + "\nlocal KEYS, ARGV\n" + prelude)
	for _, n := range names {
		fmt.Fprintf(&b, "\nredis.register_function('%s_%s', function(k, a)\nKEYS, ARGV = k, a\n%s\nend)\n", name, n, bodies[n])
	}
	l := &Library{name: name, code: b.String(), scripts: map[string]*Script{}}
	for _, n := range names {
		l.scripts[n] = &Script{lib: l, fn: name + "_" + n, script: redis.NewScript(prelude + "\n" + bodies[n])}
	}
	return l
}

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
// servers, loading it there the first time it is asked. A server that
// answers the load with an error (it has no FUNCTION command, the ACL
// denies it, it cannot compile the library) runs the scripts, and is not
// asked again; one that does not answer (a network error) runs them for
// this call only, and is asked again on the next.
func (c *Conn) Functions(ctx context.Context) bool {
	switch c.mode.Load() {
	case modeFunctions:
		return true
	case modeScripts:
		return false
	}
	err := c.Load(ctx)
	var rerr redis.Error
	switch {
	case err == nil:
		c.mode.Store(modeFunctions)
		return true
	case errors.As(err, &rerr):
		c.mode.Store(modeScripts)
	}
	return false
}

// Load loads the library on the server, or on every master of a Cluster;
// a server that has it already is left as it is.
func (c *Conn) Load(ctx context.Context) error {
	if cc, ok := c.c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return c.lib.loadOn(ctx, n) })
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
// a Cluster master that joined after the library was loaded. Run runs it
// again.
func Missing(err error) bool {
	return redis.HasErrorPrefix(err, "NOSCRIPT") || redis.HasErrorPrefix(err, "Function not found")
}

// Run runs the script on c's servers: FCALL when the library runs as
// functions there (loaded again, and the call repeated once, where a
// server has lost it), else EVALSHA, or EVAL where the server does not
// have the script.
func (s *Script) Run(ctx context.Context, c *Conn, keys []string, args ...any) *redis.Cmd {
	if !c.Functions(ctx) {
		return s.script.Run(ctx, c.c, keys, args...)
	}
	cmd := c.c.FCall(ctx, s.fn, keys, args...)
	if Missing(cmd.Err()) {
		if err := c.Load(ctx); err != nil {
			cmd.SetErr(err)
			return cmd
		}
		cmd = c.c.FCall(ctx, s.fn, keys, args...)
	}
	return cmd
}

// Queue queues the script on pipe (a pipeline of c's client), FCALL or
// EVALSHA as Run would choose. Its error after pipe runs may be Missing:
// then the call did nothing, and Run runs it again.
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
