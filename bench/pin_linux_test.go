package bench

import (
	"maps"
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
// puts each thread back on the CPUs it had, a thread's own as well. On a
// machine of one CPU it refuses, changing nothing.
func TestPinRedis(t *testing.T) {
	srv, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	cpus := cpuList(&all)
	pid := srv.PID()
	if len(cpus) >= 2 {
		// One Redis thread on a CPU set of its own, which undo must keep.
		var one unix.CPUSet
		one.Set(cpus[0])
		if err := unix.SchedSetaffinity(pid, &one); err != nil {
			t.Fatal(err)
		}
	}
	redisWas, benchWas := threadCPUs(t, pid), threadCPUs(t, os.Getpid())
	undo, err := pinRedis(pid)
	if len(cpus) < 2 {
		if err == nil || !strings.Contains(err.Error(), "one of its own") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("pinRedis on %d CPU: %v, want a one-line refusal", len(cpus), err)
		}
		if got := threadCPUs(t, pid); !maps.EqualFunc(got, redisWas, slices.Equal) {
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
	if c := threadCPUs(t, pid)[pid]; !slices.Equal(c, []int{cpus[0]}) {
		t.Errorf("after undo, Redis's main thread on CPUs %v, want its own [%d] back", c, cpus[0])
	}
	for tid, c := range threadCPUs(t, os.Getpid()) {
		if was, ok := benchWas[tid]; ok && !slices.Equal(c, was) {
			t.Errorf("after undo, bench thread %d on CPUs %v, was %v", tid, c, was)
		}
	}
}

// A Redis the bench did not start (--redis: pid 0) is not pinned, nor is
// anything else.
func TestPinRedisRefusesOthers(t *testing.T) {
	was := threadCPUs(t, os.Getpid())
	if _, err := pinRedis(0); err == nil || !strings.Contains(err.Error(), "only a redis-server it started itself") {
		t.Fatalf("pinRedis(0): %v, want a refusal", err)
	}
	for tid, c := range threadCPUs(t, os.Getpid()) {
		if w, ok := was[tid]; ok && !slices.Equal(c, w) { // the runtime may start threads meanwhile
			t.Errorf("a refused pin moved bench thread %d to CPUs %v, was %v", tid, c, w)
		}
	}
}

// cpuList reads a mask with gaps as it is.
func TestCPUList(t *testing.T) {
	var s unix.CPUSet
	for _, c := range []int{0, 2, 5} {
		s.Set(c)
	}
	if got := cpuList(&s); !slices.Equal(got, []int{0, 2, 5}) {
		t.Fatalf("cpuList = %v, want [0 2 5]", got)
	}
}
