package redistest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startThenPanicEnv makes the test binary, run by TestServerDiesWithItsOwner,
// start a server, print its PID and panic, past any cleanup.
const startThenPanicEnv = "REDISTEST_START_THEN_PANIC"

func TestMain(m *testing.M) {
	if os.Getenv(startThenPanicEnv) != "" {
		s, err := Start()
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		fmt.Println("PID", s.cmd.Process.Pid)
		panic("a test binary dies without closing its server")
	}
	os.Exit(m.Run())
}

// A test binary that panics skips every Close; its redis-server must not
// outlive it.
func TestServerDiesWithItsOwner(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), startThenPanicEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	cmd.Wait() // the panic: exit status 2
	pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "PID ")))
	if err != nil {
		t.Fatalf("the owner printed %q", line)
	}
	for deadline := time.Now().Add(10 * time.Second); alive(pid); {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server %d still runs 10 s after its owner died", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid is a process that has not exited (a zombie
// waiting to be reaped counts as exited).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// "pid (comm) state ...": the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
