package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// pinRedis gives the redis-server of process pid, one the bench started
// itself, a CPU of its own for a while: every thread of it goes on the
// last CPU this process may use, and every thread of this process on the
// others, so that the processes this one starts from then on (the crawler
// processes, which inherit the CPUs of the thread that starts them) and
// the test sites it serves stay off Redis's CPU. undo puts every thread it
// moved back on the CPUs that thread had. Other processes of the machine
// may still run on Redis's CPU, and on a machine with SMT its sibling
// shares its core.
// It fails, leaving every thread where it was, when pid is 0 (a Redis the
// bench did not start: not the bench's to pin), when this process may use
// fewer than two CPUs, or when the system refuses; its error is one line.
func pinRedis(pid int) (undo func() error, err error) {
	if pid <= 0 {
		return nil, errors.New("bench: pin: the bench pins only a redis-server it started itself (not one given with --redis)")
	}
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		return nil, fmt.Errorf("bench: pin: this process's CPUs: %w", err)
	}
	cpus := cpuList(&all)
	if len(cpus) < 2 {
		return nil, fmt.Errorf("bench: pin: this process may use %d CPU, and Redis needs one of its own beside the crawl's", len(cpus))
	}
	var own, rest unix.CPUSet
	own.Set(cpus[len(cpus)-1])
	for _, c := range cpus[:len(cpus)-1] {
		rest.Set(c)
	}
	var moved []movedThread
	undo = func() error {
		var first error
		for _, m := range moved {
			if err := unix.SchedSetaffinity(m.tid, &m.was); err != nil && !errors.Is(err, unix.ESRCH) && first == nil {
				first = fmt.Errorf("bench: pin: putting thread %d back on its CPUs: %w", m.tid, err)
			}
		}
		return first
	}
	for _, p := range []struct {
		pid int
		to  *unix.CPUSet
	}{{pid, &own}, {os.Getpid(), &rest}} {
		if err := setThreads(p.pid, p.to, &moved); err != nil {
			_ = undo() // best effort: the error says what went wrong first
			return nil, err
		}
	}
	return undo, nil
}

// movedThread is a thread pinRedis moved, and the CPUs it had.
type movedThread struct {
	tid int
	was unix.CPUSet
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

// setThreads puts every thread of process pid on the CPUs in s, adding
// each to moved with the CPUs it had. Threads the process starts meanwhile
// inherit their starter's CPUs, which may be the old ones, so the threads
// are looked at again until a pass finds none it had not set; a process
// that still starts new ones after setPasses passes is an error.
func setThreads(pid int, s *unix.CPUSet, moved *[]movedThread) error {
	done := map[int]bool{}
	for range setPasses {
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
			fresh, done[tid] = true, true
			m := movedThread{tid: tid}
			if err := unix.SchedGetaffinity(tid, &m.was); err != nil {
				if errors.Is(err, unix.ESRCH) {
					continue // ended meanwhile
				}
				return fmt.Errorf("bench: pin: thread %d of process %d: %w", tid, pid, err)
			}
			if err := unix.SchedSetaffinity(tid, s); err != nil {
				if errors.Is(err, unix.ESRCH) {
					continue
				}
				return fmt.Errorf("bench: pin: thread %d of process %d: %w", tid, pid, err)
			}
			*moved = append(*moved, m)
		}
		if !fresh {
			return nil
		}
	}
	return fmt.Errorf("bench: pin: process %d still starts threads after %d passes", pid, setPasses)
}

// setPasses bounds setThreads's looks at a process's threads.
const setPasses = 5
