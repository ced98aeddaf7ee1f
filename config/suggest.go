package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// envPrefix starts every variable a setting reads.
const envPrefix = "CRAWLER_"

// testEnvPrefix starts variables read by test builds (internal/clock's
// CRAWLER_TEST_CLOCK_SKEW), which are no settings but no mistakes either.
const testEnvPrefix = "CRAWLER_TEST_"

// UnknownEnv returns a warning for each CRAWLER_* variable in environ
// (as os.Environ gives it) that no setting reads, naming the setting's
// variable it most likely meant, for the command to log. Variables are
// read only by their exact names, so a misspelt one is otherwise ignored
// without a word.
func UnknownEnv(environ []string) []string {
	c := Default()
	known := map[string]bool{}
	c.each(func(f reflect.StructField, _ reflect.Value) { known[f.Tag.Get("env")] = true })
	var warnings []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix) || strings.HasPrefix(name, testEnvPrefix) || known[name] {
			continue
		}
		f, ok := c.closest(name)
		switch {
		case ok && f.Tag.Get("env") == "-":
			warnings = append(warnings, fmt.Sprintf("%s is not a setting; %s is read from the --config file only", name, f.Tag.Get("yaml")))
			continue
		case ok:
			warnings = append(warnings, fmt.Sprintf("%s is not a setting; did you mean %s?", name, f.Tag.Get("env")))
			continue
		}
		warnings = append(warnings, fmt.Sprintf("%s is not a setting, and is ignored ('crawler run -h' names each setting's variable)", name))
	}
	slices.Sort(warnings)
	return warnings
}

// closest finds the setting a mistyped name most likely meant: one that
// any of its names (file key, flag, variable) matches once case, - and _,
// and the CRAWLER_ prefix are set aside, or else the one with the fewest
// edits away, if few enough (a third of the name's length, at least 2).
func (c *Config) closest(name string) (reflect.StructField, bool) {
	n := normal(name)
	var best reflect.StructField
	bestD := max(2, len(n)/3) + 1
	c.each(func(f reflect.StructField, _ reflect.Value) {
		for _, alias := range []string{f.Tag.Get("yaml"), f.Tag.Get("flag"), f.Tag.Get("env")} {
			if alias == "-" || alias == "" {
				continue
			}
			a := normal(alias)
			d := editDistance(n, a)
			if strings.ReplaceAll(n, "_", "") == strings.ReplaceAll(a, "_", "") {
				d = 0
			}
			if d < bestD {
				best, bestD = f, d
			}
		}
	})
	return best, bestD <= max(2, len(n)/3)
}

// normal is a name in lower case with _ for -, without CRAWLER_.
func normal(name string) string {
	name = strings.ToLower(strings.ReplaceAll(name, "-", "_"))
	return strings.TrimPrefix(strings.TrimLeft(name, "_"), strings.ToLower(envPrefix))
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
