package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/polite-crawler/polite/fetch"
	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
)

// Fetches through the permit transport reach /metrics: each response's
// code, the bytes of its body, and its duration, which covers the time the
// site took to send the body.
func TestFetchesThroughTheTransport(t *testing.T) {
	srv, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rdb := srv.Client()
	defer rdb.Close()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			w.Write([]byte(strings.Repeat("a", 1000)))
			w.(http.Flusher).Flush()
			time.Sleep(200 * time.Millisecond)
			w.Write([]byte(strings.Repeat("b", 1000)))
		default: // robots.txt too: none
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte("no such page")) // 12 bytes
		}
	}))
	defer site.Close()
	lim := limiter.New(rdb, &limiter.Options{NoRestartGuard: true})
	defer lim.Close()
	m := New()
	// robots.txt is fetched without the Observer, so that only the pages count.
	rob := robots.NewCache(rdb, &http.Client{Transport: &fetch.RobotsTransport{Limiter: lim}}, &robots.CacheOptions{UserAgent: "politebot/1.0"})
	c := &http.Client{Transport: &fetch.Transport{Limiter: lim, Robots: rob, Cap: 3, Observer: m}, Timeout: 30 * time.Second}
	for _, path := range []string{"/slow", "/missing"} {
		resp, err := c.Get(site.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	body := scrape(t, m)
	has(t, body, `polite_fetches_total{code="200"} 1`, `polite_fetches_total{code="404"} 1`,
		"polite_fetched_bytes_total 2012", "polite_fetch_duration_seconds_count 2")
	if sum := value(t, body, "polite_fetch_duration_seconds_sum"); sum < 0.2 {
		t.Errorf("polite_fetch_duration_seconds_sum = %v: less than the 200 ms /slow took to send its body", sum)
	}
}

// value is the sample named series (name and labels, as /metrics writes
// them) in body.
func value(t *testing.T, body, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("/metrics lacks %s", series)
	return 0
}

var _ fetch.Observer = (*Metrics)(nil)
