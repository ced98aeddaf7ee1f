package robots

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// noScripts is a real client whose scripts fail, as on a Redis whose user
// may not run them: commands still work.
type noScripts struct{ redis.Cmdable }

var errInjected = errors.New("injected: scripts refused")

func (noScripts) EvalSha(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(errInjected)
	return cmd
}

func (noScripts) Eval(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(errInjected)
	return cmd
}

// A fetch lease the cache cannot give back is no lost policy: the policy
// is fetched and stored, and the failure is told to Log.
func TestLeaseNotGivenBackIsLogged(t *testing.T) {
	rs := &robotsServer{status: 200, body: "User-agent: *\nDisallow: /private/\n"}
	site := httptest.NewServer(rs)
	defer site.Close()
	var logs bytes.Buffer
	rdb := srv.Client()
	defer rdb.Close()
	c := NewCache(noScripts{rdb}, &http.Client{Timeout: 30 * time.Second}, &CacheOptions{
		Prefix: "t:" + t.Name(), Log: slog.New(slog.NewTextHandler(&logs, nil))})
	p, err := c.Policy(ctxT(t), mustURL(t, site.URL+"/private/x"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Allowed("/private/x") {
		t.Fatalf("policy %+v allows /private/x: robots.txt not applied", p)
	}
	if got := logs.String(); !strings.Contains(got, "could not give back the robots.txt fetch lease") || !strings.Contains(got, errInjected.Error()) {
		t.Fatalf("log %q: want the lease failure, with its cause", got)
	}
}
