package frontier

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// The worker's step after a fetch: admit the page's links, settle it, take
// the next URL. One pipelined round trip (DoneNext) against three calls.
func BenchmarkAfterFetch(b *testing.B) {
	for _, c := range []struct {
		name string
		step func(ctx context.Context, f *Frontier, it Item, links []string) (Item, error)
	}{
		{"DoneNext", func(ctx context.Context, f *Frontier, it Item, links []string) (Item, error) {
			next, _, err := f.DoneNext(ctx, it, links)
			return next, err
		}},
		{"Add+Done+Next", func(ctx context.Context, f *Frontier, it Item, links []string) (Item, error) {
			f.Add(ctx, it.Depth+1, links...)
			f.Done(ctx, it)
			return f.Next(ctx)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			f := newFrontier(b, Options{})
			for s := 0; s < 20; s++ { // 20 sites, plenty queued
				var urls []string
				for p := 0; p < b.N/20+2; p++ {
					urls = append(urls, fmt.Sprintf("http://s%d.example/p/%d", s, p))
				}
				f.Add(ctx, 0, urls...)
			}
			it, err := f.Next(ctx)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				links := []string{fmt.Sprintf("http://%s/new/%d", it.Site, i), "http://s0.example/p/0"}
				next, err := c.step(ctx, f, it, links)
				if errors.As(err, new(*EmptyError)) { // every site served this millisecond: not timed
					b.StopTimer()
					for errors.As(err, new(*EmptyError)) {
						next, err = f.Next(ctx)
					}
					b.StartTimer()
				}
				if err != nil {
					b.Fatal(err)
				}
				it = next
			}
		})
	}
}

// A link's fingerprint: SipHash-2-4 under the crawl's seen key, against
// the FNV-1a 64 of crawls made before they had a key.
func BenchmarkFingerprint(b *testing.B) {
	key, err := parseSeenKey(newSeenKey())
	if err != nil {
		b.Fatal(err)
	}
	u := "http://www.example.com/some/path/to/a/page.html?with=a&query=string"
	for _, l := range []struct {
		name string
		lay  *layout
	}{{"siphash", &layout{key: key}}, {"fnv", &layout{}}} {
		b.Run(l.name, func(b *testing.B) {
			for b.Loop() {
				l.lay.fingerprint(u)
			}
		})
	}
}
