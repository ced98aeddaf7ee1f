package main

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nlnwa/gowarc"
	"github.com/polite-crawler/polite/internal/redistest"
)

// `crawler run --warc DIR` keeps every exchange: read back with another
// implementation (gowarc), there is one response record per request the
// sites answered (pages and robots.txt), each with its request record, and
// no file is left unfinished.
func TestRunWritesWARC(t *testing.T) {
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	ts, seeds := startSites(t, "uniform", 2)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	waitAll(t, fleet(t, ctx, 1, rs.Addr, seeds, "--workers", "4", "--lease", "2s", "--warc", dir))

	var answered int64
	for _, s := range ts.Stats().Sites {
		answered += s.Requests
	}
	if open, _ := filepath.Glob(filepath.Join(dir, "*.open")); len(open) > 0 {
		t.Errorf("files left unfinished: %v", open)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if len(names) == 0 {
		t.Fatalf("no WARC file in %s", dir)
	}
	types := map[string]int{}
	robots := 0
	for _, name := range names {
		f, err := gowarc.NewWarcFileReader(name, 0, gowarc.WithStrictValidation())
		if err != nil {
			t.Fatal(err)
		}
		for {
			r, _, v, err := f.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if v != nil && !v.Valid() {
				t.Errorf("%s: %v", name, v)
			}
			types[r.Type().String()]++
			if r.Type() == gowarc.Response && strings.HasSuffix(r.WarcHeader().Get(gowarc.WarcTargetURI), "/robots.txt") {
				robots++
			}
		}
		f.Close()
	}
	t.Logf("%d requests answered by the sites; records %v in %d file(s)", answered, types, len(names))
	if int64(types["response"]) != answered || types["request"] != types["response"] {
		t.Errorf("%d response and %d request records for %d requests the sites answered", types["response"], types["request"], answered)
	}
	if robots != len(seeds) {
		t.Errorf("%d robots.txt responses recorded, want %d", robots, len(seeds))
	}
	if types["warcinfo"] != len(names) {
		t.Errorf("%d warcinfo records in %d files", types["warcinfo"], len(names))
	}
}
