package redisinfo

import "testing"

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
