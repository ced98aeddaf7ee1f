package main

import (
	"context"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
)

// Redis with appendonly yes, killed (SIGKILL) mid-crawl while permits are
// held for slow downloads and restarted from its append-only file on the
// same port and directory: the crawl goes on where it was, every page is
// fetched, no site sees more than its cap or a gap under its delay, and
// every worker exits 0. What is lost is what the file had not yet on disk
// (up to a second with appendfsync everysec, nothing with always): pages
// done in that time are fetched again, and the restart guard withholds new
// permits only for sites whose state was lost. The test reports both, and
// the same crawl without a crash ("baseline") for the time lost.
func TestRedisCrashWithAOF(t *testing.T) {
	for _, fsync := range []string{"baseline", "everysec", "always"} {
		t.Run(fsync, func(t *testing.T) {
			crash := fsync != "baseline"
			if !crash {
				fsync = "everysec"
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			rs, err := redistest.StartAOF(fsync)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(rs.Close)
			ts, seeds := faultSites(t, 0.4)
			began := time.Now()
			cmds := fleet(t, ctx, 3, rs.Addr, seeds, "--workers", "6", "--lease", "1s", "--timeout", "8s", "--visibility", "12s")
			waitHeld(t, ts, 4, 0)
			_, before := totals(ts)
			crashed, crashedMs := time.Now(), ts.Stats().UptimeMs
			if crash {
				if err := rs.Restart(); err != nil {
					t.Fatal(err)
				}
				t.Logf("Redis killed and restarted from its AOF (appendfsync %s) in %s, %s into the crawl, after %d requests",
					fsync, time.Since(crashed).Round(time.Millisecond), crashed.Sub(began).Round(time.Millisecond), before)
				t.Logf("first request %s after the restart", untilNextRequest(ts))
			}
			waitAll(t, cmds)
			t.Logf("crawl done %s after the crash point (%s in all)", time.Since(crashed).Round(100*time.Millisecond), time.Since(began).Round(100*time.Millisecond))
			window, at := overCapWindow(ts)
			if window > 0 {
				t.Errorf("a site was over its cap for %s after Redis restarted from its AOF (crash at %d ms; steps at %v ms)", window, crashedMs, at)
			}
			checkPolite(t, ts)
			checkAllFetched(t, ts)
			var dups, requests int64
			for _, s := range ts.Stats().Sites {
				dups, requests = dups+s.DuplicateFetches, requests+s.Requests
			}
			t.Logf("%s: pages fetched twice %d, requests %d in all", t.Name(), dups, requests)
			if !crash || fsync == "always" {
				// Nothing written is lost: only downloads under way at the
				// crash (at most all 3 workers' 6) may be fetched again.
				checkRefetchedAtMost(t, ts, 3*6)
			}
		})
	}
}
