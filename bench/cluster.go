package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/polite-crawler/polite/limiter"
	"github.com/redis/go-redis/v9"
)

// ClusterMaster is what one master of a Redis Cluster did for a crawl.
type ClusterMaster struct {
	Addr      string
	Keys      int64         // the crawl's keys on it when the crawl ended
	Shards    int           // frontier shards whose hash tag it serves
	CPU       time.Duration // its Redis CPU over the crawl
	PerPage   time.Duration // CPU ÷ the crawl's pages
	Commands  int64         // commands it processed over the crawl
	ShareCPU  float64       // CPU ÷ all masters' CPU
	ShareKeys float64
}

// ClusterRow is a crawl whose frontier and semaphores live on a Redis
// Cluster, measured at the test sites and on each master.
type ClusterRow struct {
	CrawlRow
	Masters []ClusterMaster
}

// clusterCrawls crawls the spec's sites with procs `crawler run` processes
// on a Cluster of masters redis-servers of its own (started here, closed
// on return), in each of crawlModes, and reads from every master its
// share of the crawl's keys and of Redis CPU.
func clusterCrawls(ctx context.Context, s CrawlSpec, masters, procs, workers, shards int) ([]ClusterRow, error) {
	cl, err := redistest.StartCluster(masters)
	if err != nil {
		return nil, fmt.Errorf("bench: cluster: %w", err)
	}
	defer cl.Close()
	cc := cl.Client()
	defer cc.Close()
	if err := waitGuardCluster(ctx, cc); err != nil {
		return nil, err
	}
	nodes := make([]*redis.Client, len(cl.Nodes))
	for i, a := range cl.Addrs() {
		nodes[i] = redis.NewClient(&redis.Options{Addr: a})
		defer nodes[i].Close()
	}
	var rows []ClusterRow
	for _, mode := range crawlModes {
		row, err := s.clusterCrawl(ctx, cl.Addrs(), nodes, mode, procs, workers, shards)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func (s CrawlSpec) clusterCrawl(ctx context.Context, addrs []string, nodes []*redis.Client, mode string, procs, workers, shards int) (ClusterRow, error) {
	cpu0 := make([]time.Duration, len(nodes))
	cmds0 := make([]int64, len(nodes))
	for i, n := range nodes {
		var err error
		if cpu0[i], err = redisCPU(ctx, n); err != nil {
			return ClusterRow{}, err
		}
		if cmds0[i], err = commands(ctx, n); err != nil {
			return ClusterRow{}, err
		}
	}
	crawlName := fmt.Sprintf("bench-cluster-%d", time.Now().UnixNano())
	name := fmt.Sprintf("polite %s, %d masters, %d process(es)", mode, len(nodes), procs)
	spec := s
	spec.RedisAddr = addrs[0] // crawl's own CPU figure is one node's: replaced below by all of them
	row, err := spec.crawl(ctx, name, procs, workers, func(seeds []string) []string {
		args := append(s.runArgs(crawlName, workers, "--redis-cluster", strings.Join(addrs, ",")), "--shards", strconv.Itoa(shards), "--semaphore", mode)
		return append(args, seeds...)
	})
	if err != nil {
		return ClusterRow{}, err
	}
	row.Mode = mode
	out := ClusterRow{CrawlRow: row}
	var cpuAll time.Duration
	var keysAll int64
	for i, n := range nodes {
		cpu1, err := redisCPU(ctx, n)
		if err != nil {
			return ClusterRow{}, err
		}
		cmds1, err := commands(ctx, n)
		if err != nil {
			return ClusterRow{}, err
		}
		keys, err := countKeys(ctx, n, crawlName+":*")
		if err != nil {
			return ClusterRow{}, fmt.Errorf("bench: SCAN: %w", err)
		}
		m := ClusterMaster{Addr: addrs[i], Keys: keys, CPU: cpu1 - cpu0[i], Commands: cmds1 - cmds0[i]}
		if row.Pages > 0 {
			m.PerPage = m.CPU / time.Duration(row.Pages)
		}
		cpuAll += m.CPU
		keysAll += keys
		out.Masters = append(out.Masters, m)
	}
	if err := countShards(ctx, nodes, crawlName, shards, out.Masters); err != nil {
		return ClusterRow{}, err
	}
	for i := range out.Masters {
		if cpuAll > 0 {
			out.Masters[i].ShareCPU = float64(out.Masters[i].CPU) / float64(cpuAll)
		}
		if keysAll > 0 {
			out.Masters[i].ShareKeys = float64(out.Masters[i].Keys) / float64(keysAll)
		}
	}
	if row.Pages > 0 {
		out.RedisCPU = cpuAll / time.Duration(row.Pages)
	}
	return out, nil
}

// countShards notes on each master how many of the crawl's frontier
// shards it serves: the master that answers for a shard's ready key.
func countShards(ctx context.Context, nodes []*redis.Client, crawl string, shards int, out []ClusterMaster) error {
	for sh := range shards {
		key := crawl + ":{s" + strconv.Itoa(sh) + "/crawl:" + crawl + "}:ready"
		slot, err := nodes[0].ClusterKeySlot(ctx, key).Result()
		if err != nil {
			return fmt.Errorf("bench: CLUSTER KEYSLOT: %w", err)
		}
		for i, n := range nodes {
			c, err := n.ClusterCountKeysInSlot(ctx, int(slot)).Result()
			if err != nil {
				return fmt.Errorf("bench: CLUSTER COUNTKEYSINSLOT: %w", err)
			}
			if c > 0 {
				out[i].Shards++
			}
		}
	}
	return nil
}

// commands is a node's total_commands_processed.
func commands(ctx context.Context, rdb *redis.Client) (int64, error) {
	f, err := info(ctx, rdb, "stats")
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(f["total_commands_processed"], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bench: INFO stats total_commands_processed: %w", err)
	}
	return n, nil
}

// waitGuardCluster waits until every master of a fresh Cluster grants
// permits (see waitGuard).
func waitGuardCluster(ctx context.Context, cc *redis.ClusterClient) error {
	lim := limiter.New(cc, nil)
	defer lim.Close()
	left, err := lim.GuardLeft(ctx)
	if err != nil {
		return fmt.Errorf("bench: cluster: %w", err)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(left):
		return nil
	}
}
