//go:build skewtest

package clock

import (
	"fmt"
	"os"
	"time"
)

// Env names the variable a skewtest build reads its shift from.
const Env = "CRAWLER_TEST_CLOCK_SKEW"

func init() {
	v := os.Getenv(Env)
	if v == "" {
		return
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "clock: %s=%q: %v\n", Env, v, err)
		os.Exit(2)
	}
	skew = d
}
