package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polite-crawler/polite/internal/luafn"
	"github.com/polite-crawler/polite/internal/redistest"
)

func TestParseMonitorLine(t *testing.T) {
	for _, c := range []struct {
		line string
		want []string // nil: not a client's command
	}{
		{`1700000000.123456 [0 127.0.0.1:5000] "SET" "k" "v"`, []string{"SET", "k", "v"}},
		{`1700000000.123456 [3 unix:/tmp/redis.sock] "get" "a b"`, []string{"get", "a b"}},
		{`1.0 [0 127.0.0.1:1] "set" "q\"\\\n\r\t\a\b" "\x02\xff\x00"`, []string{"set", "q\"\\\n\r\t\a\b", "\x02\xff\x00"}},
		{`1.0 [0 127.0.0.1:1] "ping"`, []string{"ping"}},
		{`1.0 [0 127.0.0.1:1] "set" ""`, []string{"set", ""}},
		{`1.0 [0 lua] "ZADD" "k" "1" "m"`, nil},            // run by a script: its script is replayed
		{`OK`, nil},                                        // MONITOR's answer
		{`1.0 [0 127.0.0.1:1] "set" "open`, nil},           // cut short
		{`1.0 [0 127.0.0.1:1] "set" "\x4"`, nil},           // a short escape
		{`1.0 [0 127.0.0.1:1] "set" "\xzz"`, nil},          // not hex
		{`1.0 [0 127.0.0.1:1] set k`, nil},                 // unquoted
		{`1.0 [0 127.0.0.1:1] "a" "b\`, nil},               // a lone backslash
		{`1.0 [0 127.0.0.1:1] `, nil},                      // no command
		{`] "set" [0 127.0.0.1:1] "x"`, nil},               // brackets the wrong way round
		{`1.0 [0 127.0.0.1:1] "a""b"`, []string{"a", "b"}}, // Redis always spaces them; accepted
	} {
		got, ok := ParseMonitorLine(c.line)
		if ok != (c.want != nil) || !slices.Equal(got, c.want) {
			t.Errorf("ParseMonitorLine(%q) = %q, %v; want %q", c.line, got, ok, c.want)
		}
	}
}

func ExampleParseMonitorLine() {
	args, ok := ParseMonitorLine(`1764151200.000001 [0 127.0.0.1:52000] "HSET" "polite:{s1}:rules" "a.example" "3 0"`)
	fmt.Printf("%q %v\n", args, ok)
	_, ok = ParseMonitorLine(`1764151200.000002 [0 lua] "HGET" "polite:{s1}:rules" "a.example"`)
	fmt.Println(ok)
	// Output:
	// ["HSET" "polite:{s1}:rules" "a.example" "3 0"] true
	// false
}

// capture captures what Redis at addr runs while do runs, as redis-cli
// monitor prints it.
func capture(t *testing.T, addr string, do func()) string {
	t.Helper()
	m, err := startMonitor(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() { // do failed: its reader still runs
		if !stopped {
			m.stop(context.Background(), addr)
		}
	})
	do()
	stopped = true
	b, err := m.stop(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A capture of real traffic (a script loaded by EVAL on its first call and
// run by EVALSHA after, binary values, a subscription, a transaction)
// replayed into another Redis leaves there exactly what it left in the
// first; a script the capture calls but never loads is named.
func TestReplayCapture(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	from, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer from.Close()
	to, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer to.Close()
	src, dst := from.Client(), to.Client()
	defer src.Close()
	defer dst.Close()

	bump := redis.NewScript(`
local n = redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[2], n)
redis.call('ZADD', KEYS[3], n, ARGV[2])
return n`)
	orphan := redis.NewScript(`return 1`)
	// A library of functions, loaded by its first call inside the capture.
	lib := luafn.NewLibrary("replay_test", "", map[string]string{"bump": "return redis.call('INCRBY', KEYS[1], ARGV[1])"})
	fn := lib.On(src)
	if err := orphan.Load(ctx, dst).Err(); err != nil { // loaded before the replay, which flushes it
		t.Fatal(err)
	}
	binary := "q\"\\\n\r\t\x00\x02\xff é"
	capt := capture(t, from.Addr, func() {
		for i := 0; i < 20; i++ {
			if err := bump.Run(ctx, src, []string{"n", "h", "z"}, 3, fmt.Sprintf("f%d", i%7)).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := src.Set(ctx, "bin", binary, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := src.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.RPush(ctx, "l", "a", binary)
			p.SAdd(ctx, "s", "-3938677163876698722")
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		sub := src.Subscribe(ctx, "wake")
		if _, err := sub.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		sub.Close()
		if err := src.EvalSha(ctx, orphan.Hash(), nil).Err(); err == nil {
			t.Fatal("the orphan script ran on the captured Redis")
		}
		for i := 0; i < 3; i++ {
			if err := lib.Script("bump").Run(ctx, fn, []string{"fn"}, 2).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := src.FCall(ctx, "replay_test_orphan", nil).Err(); err == nil {
			t.Fatal("the orphan function ran on the captured Redis")
		}
	})
	c, err := ReadCapture(strings.NewReader(capt))
	if err != nil {
		t.Fatal(err)
	}
	if c.Skipped["subscribe"] == 0 || c.Skipped["multi"] != 1 || c.Skipped["exec"] != 1 {
		t.Errorf("left out %v; want the subscription and MULTI/EXEC counted", c.Skipped)
	}
	if want := []string{orphan.Hash(), "replay_test_orphan"}; !slices.Equal(c.Missing, want) {
		t.Errorf("missing scripts %q; want only %q", c.Missing, want)
	}
	started := 0
	r, err := Replay(ctx, dst, c, 4, func() error { started++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if started != 1 {
		t.Errorf("start ran %d times, want once", started)
	}
	if r.Commands != len(c.Commands) {
		t.Errorf("sent %d commands; the capture has %d", r.Commands, len(c.Commands))
	}
	// As in the capture: the first EVALSHA meets NOSCRIPT (the client then
	// sent EVAL), and so does the orphan, flushed with the replay's start;
	// the orphan function is not found.
	if r.Errors != 3 || !strings.HasPrefix(r.FirstError, "NOSCRIPT") {
		t.Errorf("%d errors, first %q; want the first EVALSHA's and the orphans'", r.Errors, r.FirstError)
	}
	if r.Calls < float64(r.Commands+3*20) { // each of the 20 script runs ran 3 commands inside
		t.Errorf("Redis ran %.0f commands for %d sent; want the scripts' own counted too", r.Calls, r.Commands)
	}
	for _, k := range []string{"n", "h", "z", "bin", "l", "s", "fn"} {
		a, err1 := src.Dump(ctx, k).Result()
		b, err2 := dst.Dump(ctx, k).Result()
		if err1 != nil || err2 != nil || a != b {
			t.Errorf("key %q: replayed %q (%v), captured %q (%v)", k, b, err2, a, err1)
		}
	}
	if ttl := dst.TTL(ctx, "bin").Val(); ttl <= 0 {
		t.Errorf("replayed SET EX left TTL %v", ttl)
	}
	// Again on the same Redis: the same work (its scripts flushed first).
	again, err := Replay(ctx, dst, c, 50, nil)
	if err != nil || again.Errors != r.Errors || again.Calls != r.Calls {
		t.Errorf("a second replay: %d errors, %.0f commands run, %v; the first: %d, %.0f", again.Errors, again.Calls, err, r.Errors, r.Calls)
	}
	if _, err := Replay(ctx, dst, c, 0, nil); err == nil {
		t.Error("depth 0 accepted")
	}
}
