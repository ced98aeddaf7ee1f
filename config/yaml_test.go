package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeFile writes text to a fresh crawler.yaml and returns its path.
func writeFile(t *testing.T, text string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "crawler.yaml")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// A file's errors name the line and the key, suggest the key meant, and
// say what is wanted and what was given, in the flags' words, never in Go's
// (time.Duration, int) or YAML's (!!str).
func TestFileErrorsNameTheKey(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"max-per-site: 3\n", "line 1: unknown key max-per-site (did you mean max_per_site?)"},
		{"workers: 2\nmaxpersite: 3\n", "line 2: unknown key maxpersite (did you mean max_per_site?)"},
		{"Max_Per_Site: 3\n", "line 1: unknown key Max_Per_Site (did you mean max_per_site?)"},
		{"redis_url: redis://r:6379\n", "line 1: unknown key redis_url (did you mean redis?)"},
		{"CRAWLER_WORKERS: 3\n", "line 1: unknown key CRAWLER_WORKERS (did you mean workers?)"},
		{"user_agnet: bot\n", "line 1: unknown key user_agnet (did you mean user_agent?)"},
		{"colour: blue\n", "line 1: unknown key colour (the keys are the flags of 'crawler run -h', with _ for -)"},
		{"workers: 2\ntimeout: ten\n", `line 2: timeout: want a duration such as 10s or 1m30s, got "ten"`},
		{"workers: many\n", `line 1: workers: want a whole number, got "many"`},
		{"workers:\n  - 1\n  - 2\n", "line 2: workers: want a whole number, got a list"},
		{"lease:\n", "line 1: lease: want a duration such as 10s or 1m30s, got nothing"},
		{"forever: maybe\n", `line 1: forever: want true or false, got "maybe"`},
		{"max_body_size: huge\n", `line 1: max_body_size: want a size such as 10MiB, 512KiB, 1GiB, 10MB or a number of bytes, got "huge"`},
		{"seeds:\n  a: b\n", "line 2: seeds: want a list, got key: value pairs"},
		{"- workers\n", "line 1: want settings as key: value lines, got a list"},
	} {
		cfg := Default()
		err := cfg.LoadFile(writeFile(t, c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v; want %q", c.text, err, c.want)
			continue
		}
		for _, goish := range []string{"time.Duration", "int", "!!", "unmarshal", "[]string", "field "} {
			if strings.Contains(err.Error(), goish) {
				t.Errorf("%q: %v speaks Go or YAML (%q)", c.text, err, goish)
			}
		}
	}
	// Every problem at once, each with its line.
	cfg := Default()
	err := cfg.LoadFile(writeFile(t, "wrokers: 3\nlease: soon\nmax_pages: 10\n"))
	if err == nil || !strings.Contains(err.Error(), "line 1: unknown key wrokers") || !strings.Contains(err.Error(), "line 2: lease:") {
		t.Errorf("two problems: %v", err)
	}
}

// Seeds may be listed in the file (or given as one value); the file's
// other settings still apply.
func TestFileSeeds(t *testing.T) {
	for _, c := range []struct {
		text string
		want []string
	}{
		{"seeds:\n  - http://a.example/\n  - https://b.example/x\nworkers: 2\n", []string{"http://a.example/", "https://b.example/x"}},
		{"seeds: http://a.example/\n", []string{"http://a.example/"}},
		{"workers: 2\n", nil},
	} {
		cfg := Default()
		if err := cfg.LoadFile(writeFile(t, c.text)); err != nil {
			t.Errorf("%q: %v", c.text, err)
			continue
		}
		if !slices.Equal(cfg.Seeds, c.want) {
			t.Errorf("%q: seeds %q, want %q", c.text, cfg.Seeds, c.want)
		}
	}
	// Other lists take comma-separated values in one string, as their flags.
	cfg := Default()
	if err := cfg.LoadFile(writeFile(t, "redis_cluster: a:1,b:2\n")); err != nil || !slices.Equal(cfg.RedisCluster, []string{"a:1", "b:2"}) {
		t.Errorf("redis_cluster: a:1,b:2 gives %q, %v", cfg.RedisCluster, err)
	}
	// Seeds are no flag and no variable: positional arguments give them.
	_, fs, _ := load(t)
	if fs.Lookup("seeds") != nil || fs.Lookup("-") != nil {
		t.Error("a --seeds flag is defined")
	}
}
