package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The robots section measures the hostile files and reports each against
// the goal, in its own section and among the goals.
func TestRobotsSection(t *testing.T) {
	rows, err := robotsCost(1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 5 || rows[0].Lines < 4000 || rows[2].Lines < 4000 || rows[3].Lines < 30000 || rows[4].Lines < 25000 || rows[0].FileKiB < 490 || rows[2].PathKiB != 1 || rows[2].PerCheck <= 0 {
		t.Fatalf("rows %+v", rows)
	}
	rows[0].PerCheck, rows[1].PerCheck = 20*time.Microsecond, 6*time.Millisecond
	r := &Report{Started: time.Now(), Command: "crawler bench --only robots", Robots: rows}
	dir := t.TempDir()
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "BENCHMARKS.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## robots.txt: matching cost", "| **20 µs** |", "| ≤ 5.00 ms per Allowed | 20 µs | met |", "| ≤ 5.00 ms per Allowed | 6.00 ms | **not met** |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("BENCHMARKS.md lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(string(md), "## Crawl") {
		t.Error("a robots-only run reports other sections")
	}
}
