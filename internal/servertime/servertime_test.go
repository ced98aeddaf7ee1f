package servertime_test

import (
	"context"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/polite-crawler/polite/internal/servertime"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

func TestMsText(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb := srv.Client()
	defer rdb.Close()
	for _, c := range []struct{ s, us, want string }{
		{"1795721129", "702096", "1795721129702"},
		{"1795721129", "5123", "1795721129005"},
		{"1795721129", "12", "1795721129000"},
		{"1795721129", "0", "1795721129000"},
		{"1795721129", "999999", "1795721129999"},
		{"1795721130", "100000", "1795721130100"},
	} {
		got, err := rdb.Eval(ctx, servertime.Lua+"return ms_text({ARGV[1], ARGV[2]})", nil, c.s, c.us).Text()
		if err != nil || got != c.want {
			t.Errorf("ms_text(%s, %s) = %q, %v; want %q", c.s, c.us, got, err, c.want)
		}
	}
	// On the server's own clock, the text is the number now_ms returns.
	for i := 0; i < 50; i++ {
		v, err := rdb.Eval(ctx, servertime.Lua+`
local down, t = now_ms()
return {string.format('%.0f', down), ms_text(t)}`, nil).StringSlice()
		if err != nil || len(v) != 2 || v[0] != v[1] {
			t.Fatalf("now_ms and ms_text disagree: %q, %v", v, err)
		}
	}
}
