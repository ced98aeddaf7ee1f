package config

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/polite-crawler/polite/internal/redistest"
)

// Any maxmemory-policy but noeviction is warned of, or refused with
// --strict, naming the safe setting; noeviction says nothing. A policy that
// cannot be read (INFO denied) is treated alike.
func TestCheckEviction(t *testing.T) {
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	ctx := context.Background()
	rdb := rs.Client()
	defer rdb.Close()
	if err := rdb.Do(ctx, "ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "+@all", "-info").Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		policy  string
		user    string // "" for the default user
		strict  bool
		wantErr string // "" for none
		wantLog string // "" for nothing logged
	}{
		{"noeviction", "", false, "", ""},
		{"noeviction", "", true, "", ""},
		{"allkeys-lru", "", false, "", "Redis may evict permits: maxmemory-policy allkeys-lru"},
		{"volatile-ttl", "", false, "", "Redis may evict permits: maxmemory-policy volatile-ttl"},
		{"volatile-lru", "", true, "--strict: Redis at " + rs.Addr + " has maxmemory-policy volatile-lru: every key the crawler writes has a TTL", ""},
		{"noeviction", "noinfo", false, "", "cannot read Redis's maxmemory-policy"},
		{"noeviction", "noinfo", true, "--strict: cannot read the maxmemory-policy of Redis at " + rs.Addr, ""},
	} {
		name := c.policy
		if c.user != "" {
			name += "/user=" + c.user
		}
		if c.strict {
			name += "/strict"
		}
		t.Run(name, func(t *testing.T) {
			if err := rdb.ConfigSet(ctx, "maxmemory-policy", c.policy).Err(); err != nil {
				t.Fatal(err)
			}
			cfg := Default()
			cfg.Redis, cfg.Strict = "redis://"+rs.Addr, c.strict
			if c.user != "" {
				cfg.Redis = "redis://" + c.user + ":pw@" + rs.Addr
			}
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			client, err := cfg.Connect(ctx, log)
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			err = cfg.CheckEviction(ctx, client, log)
			switch {
			case c.wantErr == "" && err != nil, c.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), c.wantErr)):
				t.Errorf("CheckEviction = %v, want %q", err, c.wantErr)
			case c.wantLog == "" && logs.Len() > 0, c.wantLog != "" && !strings.Contains(logs.String(), c.wantLog):
				t.Errorf("logged %q, want %q", logs.String(), c.wantLog)
			case c.wantLog != "" && !strings.Contains(logs.String(), "safe=\"maxmemory-policy noeviction\""):
				t.Errorf("logged %q, without the safe setting", logs.String())
			}
		})
	}
}
