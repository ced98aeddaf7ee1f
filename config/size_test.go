package config

import (
	"bytes"
	"flag"
	"strings"
	"testing"
)

// Byte counts take units in flags, variables and the file, and -h shows
// their defaults with units.
func TestSizesTakeUnits(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"10MiB", 10 << 20}, {"512KiB", 512 << 10}, {"1GiB", 1 << 30}, {"2TiB", 2 << 40},
		{"10MB", 10_000_000}, {"1GB", 1_000_000_000}, {"5kB", 5000}, {"5KB", 5000},
		{"1048576", 1 << 20}, {"300B", 300}, {"10 mib", 10 << 20}, {" 7 ", 7},
	} {
		c2, _, err := load(t, "--max-body-size", c.in)
		if err != nil || int64(c2.MaxBodySize) != c.want {
			t.Errorf("--max-body-size %q: %v, %v; want %d", c.in, c2, err, c.want)
		}
	}
	for _, bad := range []string{"10XB", "-1", "1.5MiB", "", "MiB", "9999999TiB", "10MiBs"} {
		if _, _, err := load(t, "--warc-size", bad); err == nil || !strings.Contains(err.Error(), "want a size such as 10MiB") {
			t.Errorf("--warc-size %q: %v, want a size error", bad, err)
		}
	}

	file := writeFile(t, "max_body_size: 512KiB\nwarc_size: 1073741824\n")
	cfg := Default()
	if err := cfg.LoadFile(file); err != nil || int64(cfg.MaxBodySize) != 512<<10 || int64(cfg.WARCSize) != 1<<30 {
		t.Fatalf("file: body %d warc %d, %v", int64(cfg.MaxBodySize), int64(cfg.WARCSize), err)
	}
	if err := cfg.ApplyEnv(func(k string) string { return map[string]string{"CRAWLER_WARC_SIZE": "2GiB"}[k] }); err != nil || int64(cfg.WARCSize) != 2<<30 {
		t.Fatalf("env: warc %d, %v", int64(cfg.WARCSize), err)
	}
	cfg.WARCSize = 1000
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--warc-size: 1kB: want at least 1MiB") {
		t.Errorf("small --warc-size: %v", err)
	}

	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var help bytes.Buffer
	fs.SetOutput(&help)
	d := Default()
	d.Bind(fs)
	fs.PrintDefaults()
	for _, want := range []string{"(default 10MiB)", "(default 1GiB)"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("-h has no %q:\n%s", want, help.String())
		}
	}
}

// A size is written back with the largest unit that divides it.
func TestSizeString(t *testing.T) {
	for _, c := range []struct {
		s    Size
		want string
	}{
		{10 << 20, "10MiB"}, {1 << 30, "1GiB"}, {10_000_000, "10MB"}, {1000, "1kB"}, {1536, "1536"}, {1, "1"}, {0, "0"},
	} {
		if got := c.s.String(); got != c.want {
			t.Errorf("%d: %q, want %q", int64(c.s), got, c.want)
		}
	}
}
