package redisinfo

import (
	"testing"
	"time"
)

const reply = "# Server\r\nredis_version:7.0.15\r\nuptime_in_seconds:42\r\n\r\n# Memory\r\nmaxmemory_policy:allkeys-lru\r\nused_memory_human:1.02M\r\n"

func TestField(t *testing.T) {
	for name, want := range map[string]string{"uptime_in_seconds": "42", "maxmemory_policy": "allkeys-lru", "redis_version": "7.0.15"} {
		if v, ok := Field(reply, name); !ok || v != want {
			t.Errorf("Field(%q) = %q, %v; want %q", name, v, ok, want)
		}
	}
	for _, name := range []string{"uptime", "# Server", "maxmemory", ""} {
		if v, ok := Field(reply, name); ok {
			t.Errorf("Field(%q) = %q, want none", name, v)
		}
	}
}

func TestFields(t *testing.T) {
	f := Fields(reply)
	if len(f) != 4 || f["used_memory_human"] != "1.02M" || f["uptime_in_seconds"] != "42" {
		t.Fatalf("Fields = %v", f)
	}
}

func TestUptime(t *testing.T) {
	for _, c := range []struct {
		name   string
		info   string
		want   time.Duration
		ok     bool
		hasErr bool
	}{
		{name: "reply", info: reply, want: 42 * time.Second, ok: true},
		{name: "zero", info: "# Server\r\nuptime_in_seconds:0\r\n", want: 0, ok: true},
		{name: "day", info: "uptime_in_seconds:86400\n", want: 24 * time.Hour, ok: true},
		{name: "absent", info: "# Server\r\nredis_version:7.0.15\r\n", ok: false},
		{name: "empty", info: "", ok: false},
		{name: "blank", info: "uptime_in_seconds:\r\n", ok: true, hasErr: true},
		{name: "fraction", info: "uptime_in_seconds:4.2\r\n", ok: true, hasErr: true},
		{name: "word", info: "uptime_in_seconds:soon\r\n", ok: true, hasErr: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			up, ok, err := Uptime(c.info)
			if up != c.want || ok != c.ok || (err != nil) != c.hasErr {
				t.Fatalf("Uptime = %v, %v, %v; want %v, %v, error %v", up, ok, err, c.want, c.ok, c.hasErr)
			}
		})
	}
}
