package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/polite-crawler/polite/internal/redistest"
	"golang.org/x/sys/unix"
)

// threadCPUs is the CPUs of every thread of process pid.
func threadCPUs(t *testing.T, pid int) map[int][]int {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[int][]int{}
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		var s unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &s); err != nil {
			continue // a thread that ended meanwhile
		}
		out[tid] = cpuList(&s)
	}
	return out
}

// pinRedis puts every thread of the redis-server on the last CPU and every
// thread of this process, and a process it starts, on the others; undo
// puts both back. On a machine of one CPU it refuses, changing nothing.
func TestPinRedis(t *testing.T) {
	srv, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rdb := srv.Client()
	defer rdb.Close()
	ctx := context.Background()
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	cpus := cpuList(&all)
	pid, err := localRedisPID(ctx, rdb, srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	redisWas := threadCPUs(t, pid)
	undo, err := pinRedis(ctx, rdb, srv.Addr)
	if len(cpus) < 2 {
		if err == nil || !strings.Contains(err.Error(), "one of its own") {
			t.Fatalf("pinRedis on %d CPU: %v, want a refusal", len(cpus), err)
		}
		if got := threadCPUs(t, pid); len(got) != len(redisWas) {
			t.Fatalf("a refused pin changed Redis's threads: %v, was %v", got, redisWas)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	last, rest := cpus[len(cpus)-1], cpus[:len(cpus)-1]
	for tid, c := range threadCPUs(t, pid) {
		if !slices.Equal(c, []int{last}) {
			t.Errorf("Redis thread %d on CPUs %v, want [%d]", tid, c, last)
		}
	}
	for tid, c := range threadCPUs(t, os.Getpid()) {
		if !slices.Equal(c, rest) {
			t.Errorf("bench thread %d on CPUs %v, want %v", tid, c, rest)
		}
	}
	child := exec.Command("sleep", "5")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var cs unix.CPUSet
	err = unix.SchedGetaffinity(child.Process.Pid, &cs)
	_ = child.Process.Kill()
	_ = child.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if c := cpuList(&cs); !slices.Equal(c, rest) {
		t.Errorf("a process started while pinned is on CPUs %v, want %v", c, rest)
	}
	if err := undo(); err != nil {
		t.Fatal(err)
	}
	for tid, c := range threadCPUs(t, pid) {
		if was, ok := redisWas[tid]; ok && !slices.Equal(c, was) {
			t.Errorf("after undo, Redis thread %d on CPUs %v, was %v", tid, c, was)
		}
	}
	for tid, c := range threadCPUs(t, os.Getpid()) {
		if !slices.Equal(c, cpus) {
			t.Errorf("after undo, bench thread %d on CPUs %v, want %v", tid, c, cpus)
		}
	}
}

// A Redis whose address is not on loopback is not pinned: it may run on
// another machine, whose process IDs mean nothing here.
func TestPinRedisRefusesRemote(t *testing.T) {
	srv, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rdb := srv.Client()
	defer rdb.Close()
	if _, err := pinRedis(context.Background(), rdb, "192.0.2.7:6379"); err == nil || !strings.Contains(err.Error(), "not on loopback") {
		t.Fatalf("pinRedis of a remote address: %v, want a refusal", err)
	}
}
