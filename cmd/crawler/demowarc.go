package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// demoWARCDir is the directory the demo's crawlers write WARC files to:
// dir as given, a new one under the system's temporary directory when dir
// is empty, or none ("") for "off".
func demoWARCDir(dir string) (string, error) {
	switch dir {
	case "off":
		return "", nil
	case "":
		d, err := os.MkdirTemp("", "polite-demo-warc-")
		if err != nil {
			return "", fmt.Errorf("demo: WARC directory: %w", err)
		}
		return d, nil
	}
	return dir, nil
}

// writeWARCNote says where the crawl's WARC files are, how many and how
// big, and how to look inside one.
func writeWARCNote(w io.Writer, dir string) {
	if dir == "" {
		return
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	var size int64
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			size += fi.Size()
		}
	}
	fmt.Fprintf(w, "\nWARC: every request and response (robots.txt included) is in %d file(s), %.1f MiB, in %s\n",
		len(files), float64(size)/(1<<20), dir)
	if len(files) > 0 {
		fmt.Fprintf(w, "  look inside: zcat %s | head -40\n", quoteShell(files[0]))
	}
}

// quoteShell quotes s for a POSIX shell when it needs it.
func quoteShell(s string) string {
	if !strings.ContainsAny(s, " \t\n'\"\\$`*?[]{}()<>|&;!#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
