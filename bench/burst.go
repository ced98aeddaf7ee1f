package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/polite-crawler/polite/limiter"
	"github.com/redis/go-redis/v9"
)

// BurstRow is one algorithm's burst: Callers goroutines, spread over Procs
// limiters (each with a client of its own, as processes would have), call
// Acquire at once on a cap-1 site whose one permit is held.
type BurstRow struct {
	Alg      string
	Procs    int
	Callers  int
	Rounds   int
	Took     time.Duration // median, from the first call until every caller had its place in line
	Commands float64       // commands Redis ran until then, per caller (INFO commandstats; inside scripts included)
	RedisCPU time.Duration // Redis CPU in those commands, per caller (commandstats usec)
	// VsAtomicTook and VsAtomicCmds are Took and Commands ÷ ModeAtomic's with
	// the same Procs, measured in the same run (1 for ModeAtomic itself).
	VsAtomicTook, VsAtomicCmds float64
}

const burstSite = "burst.example"

// measureBurst measures bursts of callers callers for each of procs, ModeLocked
// then ModeAtomic, rounds times each (after one round to warm up).
func measureBurst(ctx context.Context, addr string, callers int, procs []int, rounds int) ([]BurstRow, error) {
	obs := redis.NewClient(&redis.Options{Addr: addr})
	defer obs.Close()
	var rows []BurstRow
	for _, np := range procs {
		var pair []BurstRow
		for _, alg := range []string{AlgLocked, AlgAtomic} {
			row, err := burst(ctx, obs, addr, alg, fmt.Sprintf("bench:b%d:%d", np, len(pair)), np, callers, rounds)
			if err != nil {
				return nil, fmt.Errorf("bench: burst, %s, %d processes: %w", alg, np, err)
			}
			pair = append(pair, row)
		}
		for i := range pair {
			pair[i].VsAtomicTook = float64(pair[i].Took) / float64(pair[1].Took)
			pair[i].VsAtomicCmds = pair[i].Commands / pair[1].Commands
		}
		rows = append(rows, pair...)
	}
	return rows, nil
}

func burst(ctx context.Context, obs *redis.Client, addr, alg, prefix string, procs, callers, rounds int) (BurstRow, error) {
	mode := limiter.ModeLocked
	if alg == AlgAtomic {
		mode = limiter.ModeAtomic
	}
	var lims []*limiter.Limiter
	for i := 0; i < procs; i++ {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		l := limiter.New(c, &limiter.Options{Mode: mode, Prefix: prefix})
		defer l.Close()
		lims = append(lims, l)
	}
	owners := prefix + ":{" + burstSite + "}:owners" // DESIGN.md's key layout
	row := BurstRow{Alg: alg, Procs: procs, Callers: callers, Rounds: rounds}
	var took []time.Duration
	var cmds, usec float64
	for round := 0; round <= rounds; round++ { // round 0 warms up
		t, c, u, err := burstRound(ctx, obs, lims, owners, callers)
		if err != nil {
			return row, err
		}
		if round > 0 {
			took, cmds, usec = append(took, t), cmds+c, usec+u
		}
	}
	slices.Sort(took)
	row.Took = took[len(took)/2]
	row.Commands = cmds / float64(rounds*callers)
	row.RedisCPU = time.Duration(usec / float64(rounds*callers) * float64(time.Microsecond))
	return row, nil
}

// burstRound holds the site's one permit, starts callers Acquire calls and
// watches the site's line (one ZCARD per poll, left out of the counts) until
// all have their places; then lets them through one by one.
func burstRound(ctx context.Context, obs *redis.Client, lims []*limiter.Limiter, owners string, callers int) (took time.Duration, cmds, usec float64, err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	held, err := lims[0].TryAcquire(ctx, burstSite, 1)
	if err != nil {
		return 0, 0, 0, err
	}
	c0, u0, err := commandStats(ctx, obs)
	if err != nil {
		return 0, 0, 0, err
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := lims[i%len(lims)].Acquire(ctx, burstSite, 1)
			if err == nil {
				err = p.Release(context.WithoutCancel(ctx))
			}
			errs <- err
		}()
	}
	polls := 0
	for {
		n, err := obs.ZCard(ctx, owners).Result()
		polls++
		if err != nil {
			return 0, 0, 0, err
		}
		if n >= int64(callers)+1 {
			break
		}
		time.Sleep(200 * time.Microsecond)
	}
	took = time.Since(start)
	c1, u1, err := commandStats(ctx, obs)
	if err != nil {
		return 0, 0, 0, err
	}
	if err := held.Release(ctx); err != nil {
		return 0, 0, 0, err
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return 0, 0, 0, fmt.Errorf("a caller got no permit: %w", err)
		}
	}
	return took, c1 - c0 - float64(polls), u1 - u0, nil
}

// burstVerdicts judge ModeLocked's rows against goals.burst.
func (r *Report) burstVerdicts() []verdict {
	var v []verdict
	for _, x := range r.Burst {
		if x.Alg != AlgLocked {
			continue
		}
		v = append(v, verdict{fmt.Sprintf("burst of %d callers in %d process(es), locked", x.Callers, x.Procs),
			goals.burst.String(), fmt.Sprintf("%.2f× commands, %.2f× time", x.VsAtomicCmds, x.VsAtomicTook),
			goals.burst.met(x.VsAtomicCmds) && goals.burst.met(x.VsAtomicTook)})
	}
	return v
}

func (r *Report) burstSection(p func(string, ...any)) {
	if len(r.Burst) == 0 {
		return
	}
	x := r.Burst[0]
	p("## Limiter: a burst of callers on a busy site")
	p("")
	p("%d goroutines call Acquire at once on a cap-1 site whose one permit is held, spread over 1 or more limiters with a client each (as processes would be). Timed until every caller has its place in line (the site's owners set has them all, polled with ZCARD every 200 µs; the polls are left out of the counts); median of %d rounds after one to warm up. Commands are those Redis ran (INFO commandstats), per caller.", x.Callers, x.Rounds)
	p("")
	p("| algorithm | processes | until all have places | ÷ atomic | commands / caller | ÷ atomic | Redis CPU / caller |")
	p("|---|---:|---:|---:|---:|---:|---:|")
	for _, x := range r.Burst {
		p("| %s | %d | %s | **%.2f×** | %.1f | **%.2f×** | %.1f µs |", x.Alg, x.Procs, x.Took.Round(100*time.Microsecond), x.VsAtomicTook, x.Commands, x.VsAtomicCmds, float64(x.RedisCPU)/float64(time.Microsecond))
	}
	p("")
	p("Goal: locked %s atomic in both. ModeLocked queues a process's callers of a site in arrival order and enters all of them in one hold of the site lock (a multi-member ZADD counts as one command, so compare Redis CPU too); ModeAtomic runs one script per caller.", goals.burst.short())
	p("")
}
