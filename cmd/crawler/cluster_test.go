package main

import (
	"context"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
)

// The whole crawl on a 3-master Redis Cluster: sites' semaphores and
// robots.txt entries spread over the nodes, the crawl's frontier on one.
// Three processes, one in ModeAtomic, crawl the mixed profile with a lease
// shorter than its slow pages: every cap and delay holds, robots.txt is
// fetched once per site, every page is fetched once, and `crawler status`
// on the cluster sees the crawl finished.
func TestClusterCrawl(t *testing.T) {
	rc, err := redistest.StartCluster(3)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	ts, seeds := startSites(t, "mixed", 8)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The sites must not all share a node, or this proves little.
	cc := rc.Client()
	defer cc.Close()
	nodes := map[string]bool{}
	for _, s := range ts.Sites() {
		u, _ := url.Parse(s.URL)
		node, err := cc.MasterForKey(ctx, "{"+u.Host+"}")
		if err != nil {
			t.Fatal(err)
		}
		nodes[node.Options().Addr] = true
	}
	if len(nodes) < 2 {
		t.Fatalf("all %d sites hash to one node", len(ts.Sites()))
	}

	cluster := []string{"--redis-cluster", strings.Join(rc.Addrs(), ","), "--workers", "6", "--lease", "1s", "--timeout", "20s", "--visibility", "40s"}
	cmds := []*exec.Cmd{
		worker(t, ctx, build(t), nil, rc.Addrs()[0], seeds, cluster...),
		worker(t, ctx, build(t), nil, rc.Addrs()[0], seeds, cluster...),
		worker(t, ctx, build(t), nil, rc.Addrs()[0], seeds, append(cluster, "--semaphore", "atomic")...),
	}
	waitAll(t, cmds)
	checkPolite(t, ts)
	checkAllFetched(t, ts)
	checkFetchedOnce(t, ts)
	t.Logf("%d sites over %d of 3 nodes", len(ts.Sites()), len(nodes))
	out, err := exec.Command(build(t), "status", "--redis-cluster", strings.Join(rc.Addrs(), ","), "--crawl", t.Name()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "0 queued, 0 in flight") {
		t.Errorf("crawler status on the cluster: %v\n%s", err, out)
	}
}
