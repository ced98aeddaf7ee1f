package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// runVersion prints what the build recorded of itself: module and
// version, VCS revision and whether the tree had changes, Go version.
func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("crawler version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: crawler version\n\nPrints the crawler's module version, the VCS revision it was built from and the Go version.")
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments %q", fs.Args())
	}
	bi, ok := debug.ReadBuildInfo()
	fmt.Fprint(stdout, describeBuild(bi, ok))
	return nil
}

// describeBuild writes build information for a user: "(devel)" for a
// version the build did not stamp (go build in a checkout), "unknown" for
// a revision it did not record (-buildvcs=false, no VCS, go run).
func describeBuild(bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return "crawler: unknown version (the binary holds no build information)\n"
	}
	set := map[string]string{}
	for _, s := range bi.Settings {
		set[s.Key] = s.Value
	}
	version := bi.Main.Version
	if version == "" {
		version = "(devel)"
	}
	rev := set["vcs.revision"]
	switch {
	case rev == "":
		rev = "unknown (built without VCS information)"
	case set["vcs.modified"] == "true":
		rev += " (modified: built with uncommitted changes)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "crawler %s\n", version)
	fmt.Fprintf(&b, "module:   %s\n", bi.Main.Path)
	fmt.Fprintf(&b, "revision: %s\n", rev)
	if t := set["vcs.time"]; t != "" {
		fmt.Fprintf(&b, "time:     %s\n", t)
	}
	fmt.Fprintf(&b, "go:       %s", bi.GoVersion)
	if set["GOOS"] != "" {
		fmt.Fprintf(&b, " %s/%s", set["GOOS"], set["GOARCH"])
	}
	b.WriteString("\n")
	return b.String()
}
