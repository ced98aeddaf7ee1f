package config

import (
	"errors"
	"flag"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// load runs Load on a fresh flag set with no environment, the caller's own
// flags being a boolean -v and a string -label.
func load(t *testing.T, args ...string) (*Config, *flag.FlagSet, error) {
	t.Helper()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Bool("v", false, "")
	fs.String("label", "", "")
	c, err := Load(fs, args, func(string) string { return "" })
	return c, fs, err
}

// A flag's value is never taken for the file: "config" after --crawl is a
// crawl's name, and after a flag that takes no value it is an argument.
func TestLoadAttributesValuesToTheirFlags(t *testing.T) {
	for _, c := range []struct {
		args  []string
		check func(*Config) bool
		rest  []string
	}{
		{[]string{"--crawl", "config", "http://a.example/"}, func(c *Config) bool { return c.Crawl == "config" }, []string{"http://a.example/"}},
		{[]string{"--user-agent", "config", "--workers", "2", "http://a.example/"},
			func(c *Config) bool { return c.UserAgent == "config" && c.Workers == 2 }, []string{"http://a.example/"}},
		{[]string{"-prefix=config", "--forever", "config"}, func(c *Config) bool { return c.Prefix == "config" && c.Forever }, []string{"config"}},
		{[]string{"--label", "--config", "-v", "config"}, func(c *Config) bool { return reflect.DeepEqual(*c, Default()) }, []string{"config"}},
		{[]string{"http://a.example/", "--config", "nowhere.yaml"}, func(c *Config) bool { return reflect.DeepEqual(*c, Default()) }, []string{"http://a.example/", "--config", "nowhere.yaml"}},
	} {
		cfg, fs, err := load(t, c.args...)
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		if !c.check(cfg) || !slices.Equal(fs.Args(), c.rest) {
			t.Errorf("%q: got %+v, arguments %q (want %q)", c.args, cfg, fs.Args(), c.rest)
		}
	}
}

// -config F, --config F and --config=F name the file; it comes between the
// defaults and the environment, and flags override both.
func TestLoadConfigFlagForms(t *testing.T) {
	file := filepath.Join(t.TempDir(), "crawler.yaml")
	if err := os.WriteFile(file, []byte("workers: 4\ncrawl: fromfile\nmax_per_site: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-config", file, "--max-per-site", "5"},
		{"--config", file, "--max-per-site", "5"},
		{"--config=" + file, "--max-per-site", "5"},
		{"--max-per-site", "5", "--config", file},
	} {
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		env := map[string]string{"CRAWLER_WORKERS": "6"}
		c, err := Load(fs, append(args, "http://a.example/"), func(k string) string { return env[k] })
		if err != nil {
			t.Errorf("%q: %v", args, err)
			continue
		}
		if c.Crawl != "fromfile" || c.Workers != 6 || c.MaxPerSite != 5 || fs.Lookup(FileFlag).Value.String() != file {
			t.Errorf("%q: crawl %q workers %d max-per-site %d --config %q", args, c.Crawl, c.Workers, c.MaxPerSite, fs.Lookup(FileFlag).Value)
		}
	}
}

// A missing file is an error that names it; a bad flag is fs.Parse's error
// even when --config comes after it; -h is flag.ErrHelp.
func TestLoadErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	if _, _, err := load(t, "--config", missing, "http://a.example/"); !errors.Is(err, fs.ErrNotExist) ||
		!strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "--config") {
		t.Errorf("missing file: %v", err)
	}
	if _, _, err := load(t, "--workers", "many", "--config", missing); err == nil || !strings.Contains(err.Error(), "-workers") {
		t.Errorf("bad flag value: %v", err)
	}
	if _, _, err := load(t, "--bogus", "--config", missing); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("unknown flag: %v", err)
	}
	if _, _, err := load(t, "-h"); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
}

// A file is one YAML document: a second one is refused, naming the file and
// the line of its `---`, rather than silently ignored.
func TestLoadFileOneDocument(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"workers: 3\n---\nworkers: 4\n", "line 2: a second YAML document"},
		{"---\n---\nworkers: 4\n", "line 2: a second YAML document"},
		{"---\nworkers: 3\nlease: 2s\n---\n", "line 4: a second YAML document"},
		{"workers: 3\nworkers: 4\n", "line 2: workers given twice (first on line 1)"},
		{"workers: 3\nwrokers: 4\n", "line 2: unknown key wrokers (did you mean workers?)"},
		{"workers: many\n", "line 1"},
	} {
		file := filepath.Join(t.TempDir(), "crawler.yaml")
		if err := os.WriteFile(file, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := Default()
		err := cfg.LoadFile(file)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "config: "+file+": ") {
			t.Errorf("%q: %v; want %q naming the file", c.text, err, c.want)
		}
	}
	for _, text := range []string{"", "# nothing\n", "---\nworkers: 3\n", "workers: 3\n...\n"} {
		file := filepath.Join(t.TempDir(), "crawler.yaml")
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := Default()
		if err := cfg.LoadFile(file); err != nil {
			t.Errorf("%q: %v", text, err)
		}
	}
}

// --max-url-length defaults to 8192, comes from every source, and is
// refused below MinURLLength, naming the flag.
func TestMaxURLLength(t *testing.T) {
	c, _, err := load(t, "--max-url-length", "300")
	if err != nil || Default().MaxURLLength != 8192 || c.MaxURLLength != 300 {
		t.Fatalf("default %d, flag gives %v, %v", Default().MaxURLLength, c, err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.MaxURLLength = MinURLLength - 1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--max-url-length: 255") {
		t.Fatalf("too short: %v", err)
	}
	if err := c.ApplyEnv(func(k string) string {
		return map[string]string{"CRAWLER_MAX_URL_LENGTH": "4096", "CRAWLER_STRICT": "true"}[k]
	}); err != nil || c.MaxURLLength != 4096 || !c.Strict {
		t.Fatalf("env: %d strict %v, %v", c.MaxURLLength, c.Strict, err)
	}
}

// --resolve adds one whole value per flag (commas are part of it), the
// first flag replacing what a file or variable gave; the variable takes
// several, space-separated; a file, a list. Bad entries and a --max-per-ip
// out of range are named.
func TestResolveAndMaxPerIP(t *testing.T) {
	c, _, err := load(t, "--resolve", "a.test:80:127.0.0.1,127.0.0.2", "--resolve", "b.test:8080:[::1]", "--max-per-ip", "4")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Repeated{"a.test:80:127.0.0.1,127.0.0.2", "b.test:8080:[::1]"}); !slices.Equal(c.Resolve, want) || c.MaxPerIP != 4 {
		t.Errorf("resolve %q, max per ip %d; want %q, 4", c.Resolve, c.MaxPerIP, want)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(file, []byte("resolve:\n  - f.test:80:127.0.0.1\n  - g.test:80:127.0.0.1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	env := func(k string) string {
		if k == "CRAWLER_RESOLVE" {
			return "e.test:80:127.0.0.1  e2.test:80:127.0.0.1"
		}
		return ""
	}
	c, err = Load(fs, []string{"--config", file}, env)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Repeated{"e.test:80:127.0.0.1", "e2.test:80:127.0.0.1"}); !slices.Equal(c.Resolve, want) {
		t.Errorf("file then variable: %q, want %q", c.Resolve, want)
	}
	fs = flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c, err = Load(fs, []string{"--config", file, "--resolve", "h.test:80:127.0.0.1"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if want := (Repeated{"h.test:80:127.0.0.1"}); !slices.Equal(c.Resolve, want) {
		t.Errorf("file then flag: %q, want %q", c.Resolve, want)
	}

	for _, args := range [][]string{{"--resolve", "a.test:80"}, {"--resolve", "127.0.0.1:80:127.0.0.2"}, {"--max-per-ip", "-1"}, {"--max-per-ip", "10001"}} {
		c, _, err := load(t, args...)
		if err == nil {
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(args[0], "--")) {
			t.Errorf("%q: err %v, want one naming %s", args, err, args[0])
		}
	}
}
