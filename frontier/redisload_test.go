package frontier

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redisinfo"
	"github.com/redis/go-redis/v9"
)

// roundTrips counts a client's round trips: one a command, one a pipeline.
type roundTrips struct{ n atomic.Int64 }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}

// load is what a Redis server has done: script calls, their usec, and its
// CPU time.
type load struct {
	scripts, scriptUsec int64
	calls               map[string]int64 // by command
	cpu                 time.Duration    // used_cpu_user + used_cpu_sys
}

func readLoad(ctx context.Context, rdb redis.Cmdable) (load, error) {
	info, err := rdb.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		return load{}, err
	}
	l := load{calls: map[string]int64{}}
	for k, v := range redisinfo.Fields(info) {
		if name, ok := strings.CutPrefix(k, "cmdstat_"); ok {
			var calls, usec int64
			for _, kv := range strings.Split(v, ",") {
				key, val, _ := strings.Cut(kv, "=")
				n, _ := strconv.ParseInt(val, 10, 64)
				switch key {
				case "calls":
					calls = n
				case "usec":
					usec = n
				}
			}
			l.calls[name] = calls
			if name == "evalsha" || name == "eval" || name == "fcall" {
				l.scripts += calls
				l.scriptUsec += usec
			}
		}
		if k == "used_cpu_user" || k == "used_cpu_sys" {
			s, _ := strconv.ParseFloat(v, 64)
			l.cpu += time.Duration(s * float64(time.Second))
		}
	}
	return l, nil
}

// A simulated crawl over 50 sites, one worker: each page settles, admits
// its links and takes the next item (DoneNext). "mixed": 2 links of its own
// site, 2 of others (1 of them seen before); "own-site": 4 of its own site
// (1 seen before); "many-known": 60 of its own site, 57 of them the same on
// every page (a site's menu), first with the process's cache of seen
// fingerprints, then without it (every link sent). It reports, per page, Redis's script calls, their usec
// and the server's CPU (noisy: one run of a shared machine), and the
// worker's round trips. Run with -benchtime=3000x.
func BenchmarkCrawlLoop(b *testing.B) {
	for _, mix := range []struct {
		name  string
		links func(it Item, i int) []string
	}{
		{"mixed", func(it Item, i int) []string {
			return []string{fmt.Sprintf("http://%s/a/%d", it.Site, i), fmt.Sprintf("http://%s/b/%d", it.Site, i),
				fmt.Sprintf("http://s%d.example/c/%d", i%50, i), "http://s0.example/"}
		}},
		{"own-site", func(it Item, i int) []string {
			return []string{fmt.Sprintf("http://%s/a/%d", it.Site, i), fmt.Sprintf("http://%s/b/%d", it.Site, i),
				fmt.Sprintf("http://%s/c/%d", it.Site, i), fmt.Sprintf("http://%s/", it.Site)}
		}},
	} {
		b.Run(mix.name, func(b *testing.B) { crawlLoop(b, mix.links, true) })
	}
	menu := func(it Item, i int) []string {
		links := []string{fmt.Sprintf("http://%s/a/%d", it.Site, i), fmt.Sprintf("http://%s/b/%d", it.Site, i), fmt.Sprintf("http://%s/c/%d", it.Site, i)}
		for k := range 57 {
			links = append(links, fmt.Sprintf("http://%s/menu/%d", it.Site, k))
		}
		return links
	}
	b.Run("many-known/cache", func(b *testing.B) { crawlLoop(b, menu, true) })
	b.Run("many-known/no-cache", func(b *testing.B) { crawlLoop(b, menu, false) })
}

func crawlLoop(b *testing.B, pageLinks func(it Item, i int) []string, cache bool) {
	ctx := context.Background()
	f := newFrontier(b, Options{})
	if !cache {
		f.seen = nil
	}
	rt := &roundTrips{}
	f.rdb.(redis.UniversalClient).AddHook(rt)
	var seeds []string
	for s := range 50 {
		seeds = append(seeds, fmt.Sprintf("http://s%d.example/", s))
	}
	f.Add(ctx, 0, seeds...)
	it, err := f.Next(ctx)
	if err != nil {
		b.Fatal(err)
	}
	f.rdb.ConfigResetStat(ctx)
	before, err := readLoad(ctx, f.rdb)
	if err != nil {
		b.Fatal(err)
	}
	trips := rt.n.Load()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		next, _, err := f.DoneNext(ctx, it, pageLinks(it, i))
		for errors.As(err, new(*EmptyError)) { // every site served this millisecond
			time.Sleep(time.Millisecond)
			next, err = f.Next(ctx)
		}
		if err != nil {
			b.Fatal(err)
		}
		it = next
	}
	b.StopTimer()
	after, err := readLoad(ctx, f.rdb)
	if err != nil {
		b.Fatal(err)
	}
	n := float64(b.N)
	if testing.Verbose() {
		for cmd, c := range after.calls {
			if d := float64(c-before.calls[cmd]) / n; d >= 0.05 {
				b.Logf("%-18s %6.2f calls/page", cmd, d)
			}
		}
	}
	b.ReportMetric(float64(after.calls["sadd"]-before.calls["sadd"])/n, "sadd/page")
	b.ReportMetric(float64(after.scripts-before.scripts)/n, "scripts/page")
	b.ReportMetric(float64(after.scriptUsec-before.scriptUsec)/n, "script-usec/page")
	b.ReportMetric(float64((after.cpu-before.cpu).Microseconds())/n, "redis-cpu-usec/page")
	b.ReportMetric(float64(rt.n.Load()-trips-2)/n, "roundtrips/page") // less the two INFO
}
