package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/polite-crawler/polite/config"
)

// parseQuiet runs parse (fs.Parse, or config.Load over fs) with fs kept
// silent. -h prints fs.Usage in full and comes back as flag.ErrHelp (exit
// 0); a flag fs cannot parse comes back as a usage error of one line that
// points to -h (exit 2), rather than flag's message followed by every
// flag. Errors not from parsing flags come back as parse returned them.
func parseQuiet(fs *flag.FlagSet, parse func() error) error {
	out, usage := fs.Output(), fs.Usage
	if usage == nil {
		usage = fs.PrintDefaults
	}
	failed := false
	fs.SetOutput(io.Discard)
	fs.Usage = func() { failed = true } // flag calls it for -h and for every parse error
	err := parse()
	fs.SetOutput(out)
	fs.Usage = usage
	switch {
	case err == nil || !failed:
		return err
	case errors.Is(err, flag.ErrHelp):
		usage()
		return err
	}
	return badFlags(fmt.Sprintf("%v (see '%s -h')", err, fs.Name()))
}

// printUsage writes a command's help to fs's output: text (its usage
// line and what it does, ending in a newline), then "Flags:" and fs's
// flags with their defaults.
func printUsage(fs *flag.FlagSet, text string) {
	fmt.Fprint(fs.Output(), text+"\nFlags:\n")
	printFlags(fs)
}

// printFlags is fs.PrintDefaults naming what each flag takes (int,
// duration, size, ...) where the flag's Value has a Type method, as
// config's do, rather than flag's "value".
func printFlags(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		var b strings.Builder
		fmt.Fprintf(&b, "  -%s", f.Name)
		name, usage := flag.UnquoteUsage(f)
		if t, ok := f.Value.(interface{ Type() string }); ok && name == "value" {
			name = t.Type()
		}
		if name != "" {
			b.WriteString(" " + name)
		}
		if b.Len() <= 4 { // a one-letter bool flag: its usage on the same line
			b.WriteString("\t")
		} else {
			b.WriteString("\n    \t")
		}
		b.WriteString(strings.ReplaceAll(usage, "\n", "\n    \t"))
		if d := f.DefValue; d != "" && d != "false" {
			if name == "string" {
				d = strconv.Quote(d) // as flag does
			}
			fmt.Fprintf(&b, " (default %s)", d)
		}
		fmt.Fprintln(fs.Output(), b.String())
	})
}

// connectFlags are the settings a command that only reads or deletes a
// crawl's keys uses: where Redis is, the key prefix, and its own logging.
var connectFlags = []string{"config", "redis", "redis-cluster", "redis-sentinel", "redis-ca", "prefix", "log-level", "log-format"}

// shownFlags are the flags each such command's -h lists; the others of
// run's settings are accepted there and ignored. A command not named lists
// all of its flags.
var shownFlags = map[string][]string{
	"status": append([]string{"crawl"}, connectFlags...),
	"crawls": connectFlags,
	"delete": append([]string{"crawl", "yes", "force"}, connectFlags...),
}

// printSomeUsage is printUsage listing only the flags named in only.
func printSomeUsage(fs *flag.FlagSet, text string, only []string) {
	some := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	some.SetOutput(fs.Output())
	for _, name := range only {
		if f := fs.Lookup(name); f != nil {
			some.Var(f.Value, f.Name, f.Usage)
			some.Lookup(f.Name).DefValue = f.DefValue
		}
	}
	printUsage(some, text)
	fmt.Fprintln(fs.Output(), "\nThe other settings of 'crawler run' are accepted (flags, CRAWLER_* variables, --config) and\nignored: 'crawler run -h' lists them.")
}

// badFlags is a usage error (errUsage, exit 2) printed as it is, without
// usageErr's "usage:".
type badFlags string

func (e badFlags) Error() string        { return string(e) }
func (e badFlags) Is(target error) bool { return target == errUsage }

// warnUnknownEnv logs a warning for each CRAWLER_* variable set that no
// setting reads (config.UnknownEnv).
func warnUnknownEnv(cfg *config.Config, stderr io.Writer) {
	warnings := config.UnknownEnv(os.Environ())
	if len(warnings) == 0 {
		return
	}
	log := newLogger(cfg, stderr, isTerminal(stderr))
	for _, w := range warnings {
		log.Warn(w)
	}
}
