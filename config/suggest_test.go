package config

import (
	"slices"
	"testing"
)

// A CRAWLER_* variable no setting reads is named with the one it most
// likely meant; known ones, test builds' ones and others' are not.
func TestUnknownEnv(t *testing.T) {
	got := UnknownEnv([]string{
		"HOME=/root", "CRAWLER_REDIS_URL=redis://r:6379", "CRAWLER_REDIS=redis://r:6379", "CRAWLER_MAXPERSITE=3",
		"CRAWLER_WROKERS=2", "CRAWLER_TEST_CLOCK_SKEW=1h", "CRAWLER_COLOUR=blue", "CRAWLER_SEEDS=http://a.example/", "CRAWLER_TIMEOUT=",
	})
	want := []string{
		"CRAWLER_COLOUR is not a setting, and is ignored ('crawler run -h' names each setting's variable)",
		"CRAWLER_MAXPERSITE is not a setting; did you mean CRAWLER_MAX_PER_SITE?",
		"CRAWLER_REDIS is not a setting; did you mean CRAWLER_REDIS_URL?",
		"CRAWLER_SEEDS is not a setting; seeds is read from the --config file only",
		"CRAWLER_WROKERS is not a setting; did you mean CRAWLER_WORKERS?",
	}
	if !slices.Equal(got, want) {
		t.Errorf("warnings:\n%q\nwant\n%q", got, want)
	}
}
