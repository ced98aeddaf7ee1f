package bench

import (
	"bufio"
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A crawl's cost to Redis, measured in a crawl, moves by ±30 % on a shared
// machine. Replaying the commands it sent, captured with MONITOR, against
// a Redis of its own measures nearly the same work without the crawl
// around it; under callgrind the count of instructions Redis ran repeats
// to a fraction of a percent, so a change to a script shows its effect
// (cmd/crawler's redis-replay). Nearly: the scripts read Redis's clock,
// and a replay runs at its own pace, so what depends on time (a lease or
// a park running out, a crawl delay) can go another way than in the crawl.

// ParseMonitorLine returns the command a client sent, as MONITOR printed it
// (`1700000000.123456 [0 127.0.0.1:5000] "SET" "k" "v"`, arguments quoted
// with Redis's escapes: \" \\ \n \r \t \a \b \xHH). ok is false for any
// other line: MONITOR's "OK", and the commands scripts ran ("[0 lua]"),
// which replaying their script runs again.
func ParseMonitorLine(line string) (args []string, ok bool) {
	open := strings.IndexByte(line, '[')
	end := strings.Index(line, "] ")
	if open < 0 || end < open {
		return nil, false
	}
	if strings.HasSuffix(line[open:end], " lua") {
		return nil, false
	}
	s := line[end+2:]
	for len(s) > 0 {
		if s[0] == ' ' {
			s = s[1:]
			continue
		}
		if s[0] != '"' {
			return nil, false
		}
		arg, rest, ok := unquote(s[1:])
		if !ok {
			return nil, false
		}
		args, s = append(args, arg), rest
	}
	return args, len(args) > 0
}

// unquote reads one argument after its opening quote up to its closing
// one; it returns the argument and what follows the closing quote.
func unquote(s string) (string, string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			return b.String(), s[i+1:], true
		case c != '\\':
			b.WriteByte(c)
			continue
		case i+1 >= len(s):
			return "", "", false
		}
		i++
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'x':
			if i+2 >= len(s) {
				return "", "", false
			}
			v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if err != nil {
				return "", "", false
			}
			b.WriteByte(byte(v))
			i += 2
		default:
			b.WriteByte(s[i]) // \" and \\
		}
	}
	return "", "", false
}

// notReplayed are commands a replay leaves out: they would change the
// replaying connection (a subscription, a protocol or database switch),
// block it, or act on the whole server rather than on the crawl's data.
var notReplayed = map[string]bool{
	"subscribe": true, "psubscribe": true, "ssubscribe": true, "unsubscribe": true, "punsubscribe": true, "sunsubscribe": true,
	"monitor": true, "hello": true, "auth": true, "client": true, "select": true, "quit": true, "reset": true, "readonly": true,
	"blpop": true, "brpop": true, "blmove": true, "brpoplpush": true, "blmpop": true, "bzpopmin": true, "bzpopmax": true, "bzmpop": true,
	"wait": true, "shutdown": true, "flushall": true, "flushdb": true, "config": true, "debug": true, "slowlog": true, "latency": true,
	"multi": true, "exec": true, "discard": true, "watch": true, "unwatch": true, "failover": true, "replicaof": true, "slaveof": true,
}

// ReplayCapture is what a MONITOR capture holds for a replay.
type ReplayCapture struct {
	Commands [][]any        // in the order Redis ran them
	Skipped  map[string]int // commands left out (notReplayed), by name
	// Missing are the SHA1s of scripts the capture calls (EVALSHA) but
	// never loads (SCRIPT LOAD, EVAL), and the functions it calls (FCALL)
	// but never loads (FUNCTION LOAD): it began after Redis had them, so
	// their calls fail in a replay, and the replay is not the crawl's work.
	Missing []string
}

// registered finds the functions a library registers, as luafn writes them.
var registered = regexp.MustCompile(`register_function\('([A-Za-z0-9_]+)'`)

// maxCaptureLine bounds one MONITOR line (a script's body is one line).
const maxCaptureLine = 16 << 20

// ReadCapture reads a MONITOR capture (redis-cli monitor's output). A
// transaction (MULTI … EXEC) is replayed as its commands, one by one.
func ReadCapture(r io.Reader) (ReplayCapture, error) {
	c := ReplayCapture{Skipped: map[string]int{}}
	loaded, called := map[string]bool{}, map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxCaptureLine)
	for sc.Scan() {
		args, ok := ParseMonitorLine(sc.Text())
		if !ok {
			continue
		}
		name := strings.ToLower(args[0])
		if notReplayed[name] {
			c.Skipped[name]++
			continue
		}
		switch {
		case (name == "eval" || name == "eval_ro") && len(args) > 1:
			loaded[fmt.Sprintf("%x", sha1.Sum([]byte(args[1])))] = true
		case name == "script" && len(args) > 2 && strings.EqualFold(args[1], "load"):
			loaded[fmt.Sprintf("%x", sha1.Sum([]byte(args[2])))] = true
		case (name == "evalsha" || name == "evalsha_ro") && len(args) > 1:
			called[strings.ToLower(args[1])] = true
		case name == "function" && len(args) > 2 && strings.EqualFold(args[1], "load"):
			for _, m := range registered.FindAllStringSubmatch(args[len(args)-1], -1) {
				loaded[m[1]] = true
			}
		case (name == "fcall" || name == "fcall_ro") && len(args) > 1:
			called[args[1]] = true
		}
		cmd := make([]any, len(args))
		for i, a := range args {
			cmd[i] = a
		}
		c.Commands = append(c.Commands, cmd)
	}
	if err := sc.Err(); err != nil {
		return c, fmt.Errorf("bench: reading the capture: %w", err)
	}
	for sha := range called {
		if !loaded[sha] {
			c.Missing = append(c.Missing, sha)
		}
	}
	slices.Sort(c.Missing)
	return c, nil
}

// ReplayResult is what a replay cost Redis.
type ReplayResult struct {
	Commands   int           // sent
	Errors     int           // answered with an error (a nil answer is none)
	FirstError string        // the first error's text, if any
	Took       time.Duration // wall time of the replay
	CPU        time.Duration // Redis's used_cpu_sys + used_cpu_user over the replay
	Calls      float64       // commands Redis ran, those inside scripts included (commandstats)
}

// Replay sends the capture's commands to rdb in order, depth to a round
// trip, after FLUSHALL, SCRIPT FLUSH, FUNCTION FLUSH and CONFIG RESETSTAT
// (rdb must be a Redis of the replay's own): with no script or function
// loaded, a call the crawl met with NOSCRIPT (or no function) meets it
// again, rather than running a script twice.
// start, if not nil, runs just before the first command is sent.
func Replay(ctx context.Context, rdb *redis.Client, c ReplayCapture, depth int, start func() error) (ReplayResult, error) {
	if depth < 1 {
		return ReplayResult{}, errors.New("bench: replay depth must be at least 1")
	}
	for _, args := range [][]any{{"flushall"}, {"script", "flush"}, {"function", "flush"}, {"config", "resetstat"}} {
		if err := rdb.Do(ctx, args...).Err(); err != nil {
			return ReplayResult{}, fmt.Errorf("bench: replay: %w", err)
		}
	}
	cpu0, err := redisCPU(ctx, rdb)
	if err != nil {
		return ReplayResult{}, fmt.Errorf("bench: replay: %w", err)
	}
	calls0, err := commandCalls(ctx, rdb) // the reset itself
	if err != nil {
		return ReplayResult{}, fmt.Errorf("bench: replay: %w", err)
	}
	if start != nil {
		if err := start(); err != nil {
			return ReplayResult{}, fmt.Errorf("bench: replay: %w", err)
		}
	}
	r := ReplayResult{}
	began := time.Now()
	for batch := range slices.Chunk(c.Commands, depth) {
		pipe := rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(batch))
		for i, args := range batch {
			cmds[i] = pipe.Do(ctx, args...)
		}
		_, _ = pipe.Exec(ctx) // each command's error is counted below
		if err := ctx.Err(); err != nil {
			return r, fmt.Errorf("bench: replay: %w", err)
		}
		for _, cmd := range cmds {
			r.Commands++
			err := cmd.Err()
			if err == nil || errors.Is(err, redis.Nil) {
				continue
			}
			var rerr redis.Error
			if !errors.As(err, &rerr) {
				return r, fmt.Errorf("bench: replay: %w", err) // the connection, not the command
			}
			r.Errors++
			if r.FirstError == "" {
				r.FirstError = err.Error()
			}
		}
	}
	r.Took = time.Since(began)
	cpu1, err := redisCPU(ctx, rdb)
	if err != nil {
		return r, fmt.Errorf("bench: replay: %w", err)
	}
	r.CPU = cpu1 - cpu0
	if r.Calls, err = commandCalls(ctx, rdb); err != nil {
		return r, fmt.Errorf("bench: replay: %w", err)
	}
	r.Calls -= calls0
	return r, nil
}
