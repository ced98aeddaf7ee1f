package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sys/unix"
)

// pinRedis gives the Redis at addr a CPU of its own for a while: every
// thread of its process goes on the last CPU this process may use, and
// every thread of this process on the others, so that the processes this
// one starts from then on (the crawler processes) and the test sites it
// serves stay off Redis's CPU. undo puts both back on the CPUs they had.
// It fails, changing nothing, when this process may use fewer than two
// CPUs, or when addr is not a redis-server on this machine (a loopback
// address whose INFO process_id is a redis-server process here).
func pinRedis(ctx context.Context, rdb *redis.Client, addr string) (undo func() error, err error) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		return nil, fmt.Errorf("bench: pin: this process's CPUs: %w", err)
	}
	cpus := cpuList(&all)
	if len(cpus) < 2 {
		return nil, fmt.Errorf("bench: pin: this process may use %d CPU, and Redis needs one of its own beside the crawl's", len(cpus))
	}
	pid, err := localRedisPID(ctx, rdb, addr)
	if err != nil {
		return nil, err
	}
	var redisWas unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &redisWas); err != nil {
		return nil, fmt.Errorf("bench: pin: Redis's CPUs: %w", err)
	}
	var own, rest unix.CPUSet
	own.Set(cpus[len(cpus)-1])
	for _, c := range cpus[:len(cpus)-1] {
		rest.Set(c)
	}
	undo = func() error {
		return errors.Join(setThreads(os.Getpid(), &all), setThreads(pid, &redisWas))
	}
	if err := errors.Join(setThreads(pid, &own), setThreads(os.Getpid(), &rest)); err != nil {
		return nil, errors.Join(err, undo())
	}
	return undo, nil
}

// cpuList is the CPUs in s, in ascending order.
func cpuList(s *unix.CPUSet) []int {
	var cpus []int
	for c := 0; len(cpus) < s.Count(); c++ {
		if s.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// localRedisPID is the process ID of the Redis at addr, when it runs on
// this machine: addr is a loopback address, and the process INFO names is
// a redis-server here.
func localRedisPID(ctx context.Context, rdb *redis.Client, addr string) (int, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("bench: pin: Redis address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return 0, fmt.Errorf("bench: pin: Redis at %s is not on loopback, so maybe not on this machine", addr)
	}
	in, err := info(ctx, rdb, "server")
	if err != nil {
		return 0, fmt.Errorf("bench: pin: %w", err)
	}
	pid, err := strconv.Atoi(in["process_id"])
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("bench: pin: Redis's INFO gives no process_id (%q)", in["process_id"])
	}
	comm, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	if err != nil || !strings.HasPrefix(strings.TrimSpace(string(comm)), "redis-server") {
		return 0, fmt.Errorf("bench: pin: process %d (Redis's process_id) is not a redis-server on this machine", pid)
	}
	return pid, nil
}

// setThreads puts every thread of process pid on the CPUs in s. Threads
// the process starts meanwhile inherit their starter's CPUs, so the
// threads are set until a pass finds none it had not set (at most a few
// passes).
func setThreads(pid int, s *unix.CPUSet) error {
	done := map[int]bool{}
	for range 5 {
		ents, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
		if err != nil {
			return fmt.Errorf("bench: pin: threads of process %d: %w", pid, err)
		}
		fresh := false
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || done[tid] {
				continue
			}
			fresh = true
			if err := unix.SchedSetaffinity(tid, s); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("bench: pin: thread %d of process %d: %w", tid, pid, err)
			}
			done[tid] = true
		}
		if !fresh {
			return nil
		}
	}
	return nil
}
