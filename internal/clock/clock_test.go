package clock

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A normal build is not shifted, whatever the environment says: the test
// binary runs itself with the variable set and reports its Skew.
func TestNormalBuildIgnoresTheVariable(t *testing.T) {
	if os.Getenv("CLOCK_TEST_CHILD") != "" {
		os.Stdout.WriteString("skew=" + Skew().String() + "\n")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestNormalBuildIgnoresTheVariable$")
	cmd.Env = append(os.Environ(), "CLOCK_TEST_CHILD=1", "CRAWLER_TEST_CLOCK_SKEW=1h")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "skew=0s\n") {
		t.Fatalf("a build without the skewtest tag read the variable:\n%s", out)
	}
	before := time.Now()
	if now := Now(); now.Before(before) || now.Sub(before) > time.Second {
		t.Fatalf("Now() = %s, time.Now() = %s", now, before)
	}
}
