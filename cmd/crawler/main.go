// Command crawler is the polite crawler's one binary. Each subcommand is a
// small function over the packages; main only dispatches.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/polite-crawler/polite/config"
)

// command is one subcommand: it parses its own flags from args and runs
// until ctx is done (SIGINT/SIGTERM) or its work ends.
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	hidden        bool // a worker process of another command
}

var commands = []command{
	{name: "demo", summary: "run a whole polite crawl locally (embedded Redis, test sites, several workers) and show what sites saw", run: runDemo},
	{name: "run", summary: "crawl from seed URLs, sharing the crawl and every site's cap with all workers on the same Redis", run: runCrawl},
	{name: "status", summary: "show a crawl's queue, its limits and each site's permits", run: runStatus},
	{name: "crawls", summary: "list the crawls in Redis with their state", run: runCrawls},
	{name: "delete", summary: "delete a crawl's keys (--crawl NAME; a dry run without --yes)", run: runDelete},
	{name: "bench", summary: "measure the limiter and the crawler against their limits and against peers; write BENCHMARKS.md", run: runBench},
	{name: "bench-worker", run: runBenchWorker, hidden: true},
	{name: "bench-colly", run: runBenchColly, hidden: true},
	{name: "redis-replay", summary: "replay a crawl's captured Redis commands and report what they cost Redis (exactly, under callgrind)", run: runRedisReplay},
	{name: "testserver", summary: "serve many local test sites and measure how politely they are crawled", run: runTestserver},
	{name: "version", summary: "print the crawler's version, VCS revision and Go version", run: runVersion},
}

// parseFlags parses args into fs: -h prints the full help and comes back
// as flag.ErrHelp (exit 0), any other problem as a one-line usage error
// (exit 2) that points to -h (parseQuiet).
func parseFlags(fs *flag.FlagSet, args []string) error {
	return parseQuiet(fs, func() error { return fs.Parse(args) })
}

// errUsage marks a usage error: the message is printed and the exit code is 2.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := notifyStop(context.Background(), os.Stderr, os.Exit) // a second Ctrl-C quits at once
	code := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(signalExit(ctx, code)) // stopped by a signal: 130 or 143
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] {
			err := c.run(ctx, args[1:], stdout, stderr)
			switch {
			case err == nil, errors.Is(err, flag.ErrHelp):
				return 0
			case errors.Is(err, errUsage):
				fmt.Fprintf(stderr, "crawler %s: %v\n", c.name, err)
				return 2
			default:
				fmt.Fprintf(stderr, "crawler %s: %v\n", c.name, err)
				if ce := (*config.ConnectError)(nil); errors.As(err, &ce) && errors.Is(ce, config.ErrUnreachable) {
					// The first run on a new machine meets this with the default address.
					fmt.Fprintf(stderr, "crawler %s: start redis-server at %s, or name another with --redis redis://HOST:PORT (or CRAWLER_REDIS_URL); `crawler demo` runs on an embedded Redis\n", c.name, ce.Addr)
				}
				return 1
			}
		}
	}
	fmt.Fprintf(stderr, "crawler: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "crawler: a crawler whose workers, on any number of hosts, share one per-site politeness cap in Redis.")
	fmt.Fprintln(w, "\nUsage: crawler COMMAND [flags]\n\nCommands:")
	for _, c := range commands {
		if !c.hidden {
			fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
		}
	}
	fmt.Fprintln(w, "\nRun 'crawler COMMAND -h' for a command's flags.")
}

// usageErr formats a usage error.
func usageErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, a...))
}
