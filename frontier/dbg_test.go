package frontier
import ("testing";"context";"fmt")
func TestDbg2(t *testing.T) {
	ctx := context.Background()
	f := newFrontier(t, Options{})
	var seeds []string
	for s := range 50 { seeds = append(seeds, fmt.Sprintf("http://s%d.example/", s)) }
	f.Add(ctx, 0, seeds...)
	it, _ := f.Next(ctx)
	own, other, empty := 0, 0, 0
	for i := 0; i < 300; i++ {
		links := []string{fmt.Sprintf("http://%s/a/%d", it.Site, i), fmt.Sprintf("http://%s/b/%d", it.Site, i), fmt.Sprintf("http://s%d.example/c/%d", i%50, i), "http://s0.example/"}
		next, _, err := f.DoneNext(ctx, it, links)
		if err != nil { empty++; next, err = nextSoon(ctx, f, 1e9) }
		if next.Site == it.Site { own++ } else if lay, _ := f.layout(ctx); lay.of(next.Site) == lay.of(it.Site) { own++ } else { other++ }
		it = next
	}
	t.Log(own, other, empty)
}
