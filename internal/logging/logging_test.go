package logging_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/logging"
	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Durations are written as "1.5s" in both formats, nested in groups too.
func TestDurationsAsStrings(t *testing.T) {
	for _, format := range []string{logging.FormatText, logging.FormatJSON} {
		t.Run(format, func(t *testing.T) {
			var b bytes.Buffer
			log, err := logging.New(&b, "info", format, false)
			if err != nil {
				t.Fatal(err)
			}
			log.WithGroup("g").Info("waited", "in", 1500*time.Millisecond)
			if format == logging.FormatText {
				if !strings.Contains(b.String(), "g.in=1.5s") {
					t.Fatalf("record %q", b.String())
				}
				return
			}
			var rec struct {
				G struct{ In any } `json:"g"`
			}
			if err := json.Unmarshal(b.Bytes(), &rec); err != nil {
				t.Fatal(err)
			}
			if rec.G.In != "1.5s" {
				t.Fatalf("in = %#v, want \"1.5s\" (record %s)", rec.G.In, b.String())
			}
		})
	}
}

// The level drops records below it; auto picks text on a terminal and
// JSON elsewhere.
func TestLevelAndFormat(t *testing.T) {
	var b bytes.Buffer
	log, err := logging.New(&b, "warn", logging.FormatAuto, false)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown")
	if strings.Contains(b.String(), "hidden") || !strings.HasPrefix(b.String(), `{"time"`) {
		t.Fatalf("warn, auto off a terminal: %q", b.String())
	}
	b.Reset()
	log, _ = logging.New(&b, "DEBUG", logging.FormatAuto, true)
	log.Debug("shown")
	if !strings.HasPrefix(b.String(), "time=") || !strings.Contains(b.String(), "level=DEBUG") {
		t.Fatalf("debug, auto on a terminal: %q", b.String())
	}
	for _, bad := range [][2]string{{"verbose", "text"}, {"info", "xml"}, {"", "auto"}} {
		if _, err := logging.New(&b, bad[0], bad[1], false); !errors.Is(err, logging.ErrInvalid) {
			t.Errorf("New(%q, %q): %v, want ErrInvalid", bad[0], bad[1], err)
		}
	}
}

// go-redis's own lines arrive at warn level with component=redis: a TTL
// under a millisecond, which go-redis rounds up and says so.
func TestRouteRedis(t *testing.T) {
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	rdb := rs.Client()
	defer rdb.Close()
	var b bytes.Buffer
	log, _ := logging.New(&b, "info", logging.FormatJSON, false)
	logging.RouteRedis(log)
	if err := rdb.Set(context.Background(), "k", "v", 500*time.Microsecond).Err(); err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(b.Bytes(), &rec); err != nil {
		t.Fatalf("%v: %q", err, b.String())
	}
	if msg, _ := rec["msg"].(string); rec["level"] != "WARN" || rec["component"] != "redis" || !strings.Contains(msg, "truncating to 1ms") {
		t.Fatalf("record %v", rec)
	}
}

// A connection go-redis cannot make is logged at debug level only: the
// command that needed it fails and its caller says so at warn level (the
// first failed try to reach Redis was said twice).
func TestRouteRedisDialFailureIsDebug(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	for _, level := range []string{"info", "debug"} {
		var b bytes.Buffer
		log, _ := logging.New(&b, level, logging.FormatJSON, false)
		logging.RouteRedis(log)
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		err := rdb.Ping(context.Background()).Err()
		rdb.Close()
		if err == nil {
			t.Fatalf("PING to %s (closed) succeeded", addr)
		}
		got := b.String()
		switch {
		case level == "info" && got != "":
			t.Errorf("at info level, a failed dial logged %q; want nothing", got)
		case level == "debug" && (!strings.Contains(got, `"level":"DEBUG"`) || !strings.Contains(got, "failed to dial") || !strings.Contains(got, `"component":"redis"`)):
			t.Errorf("at debug level, a failed dial logged %q; want it at DEBUG with component=redis", got)
		}
	}
}
