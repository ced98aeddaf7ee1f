package redistest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of private redis-servers on loopback: masters
// only, no replicas, the 16384 slots split evenly between them.
type Cluster struct {
	Nodes []*Server
}

// StartCluster starts n cluster-enabled redis-servers, gives each its share
// of the slots, introduces them to each other and waits (up to 30 s) until
// every node reports the cluster ok. The caller must Close it.
func StartCluster(n int) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("redistest: cluster of %d nodes", n)
	}
	c := &Cluster{}
	buses := make([]int, n)
	for i := range n {
		var s *Server
		var err error
		for attempt := 0; attempt < 3; attempt++ { // the bus port may be taken between probe and bind
			if buses[i], err = freePort(); err != nil {
				break
			}
			s, err = Start("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
				"--cluster-port", strconv.Itoa(buses[i]), "--cluster-node-timeout", "5000")
			if err == nil {
				break
			}
		}
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Nodes = append(c.Nodes, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.form(ctx, buses); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// form assigns the slots, makes the nodes meet, and waits for the cluster.
func (c *Cluster) form(ctx context.Context, buses []int) error {
	per := 16384 / len(c.Nodes)
	for i, s := range c.Nodes {
		lo, hi := i*per, (i+1)*per-1
		if i == len(c.Nodes)-1 {
			hi = 16383
		}
		if err := s.do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi); err != nil {
			return err
		}
	}
	for i, s := range c.Nodes[1:] {
		host, port, _ := net.SplitHostPort(s.Addr)
		if err := c.Nodes[0].do(ctx, "CLUSTER", "MEET", host, port, buses[i+1]); err != nil {
			return err
		}
	}
	want := fmt.Sprintf("cluster_known_nodes:%d", len(c.Nodes))
	for _, s := range c.Nodes {
		cl := s.Client()
		for {
			info, err := cl.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, want) {
				break
			}
			select {
			case <-ctx.Done():
				cl.Close()
				return fmt.Errorf("redistest: cluster never formed at %s: %w (last: %v %q)", s.Addr, ctx.Err(), err, info)
			case <-time.After(50 * time.Millisecond):
			}
		}
		cl.Close()
	}
	return nil
}

// do runs one command on the node.
func (s *Server) do(ctx context.Context, args ...any) error {
	cl := s.Client()
	defer cl.Close()
	if err := cl.Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("redistest: %s on %s: %w", args[:2], s.Addr, err)
	}
	return nil
}

// Addrs are the nodes' host:port addresses.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, s := range c.Nodes {
		out = append(out, s.Addr)
	}
	return out
}

// Client returns a new cluster client; the caller closes it.
func (c *Cluster) Client() *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
}

// Close stops every node.
func (c *Cluster) Close() {
	for _, s := range c.Nodes {
		s.Close()
	}
}
