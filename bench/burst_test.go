package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
)

// The burst figure runs end to end on a private Redis (small counts) and
// its section and verdicts name what they measured. Its figures are not
// judged here: they are timings.
func TestBurst(t *testing.T) {
	srv, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.WaitUptime(12 * time.Second); err != nil { // the limiter's restart guard
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rows, err := measureBurst(ctx, srv.Addr, 40, []int{1, 2}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4", len(rows))
	}
	for _, x := range rows {
		if x.Took <= 0 || x.Commands <= 0 || x.Callers != 40 || x.Rounds != 2 {
			t.Errorf("row %+v: not measured", x)
		}
		if x.Alg == AlgAtomic && (x.VsAtomicCmds != 1 || x.VsAtomicTook != 1) {
			t.Errorf("atomic row %+v: not its own baseline", x)
		}
	}
	r := &Report{Burst: rows}
	var b strings.Builder
	r.burstSection(func(f string, a ...any) { b.WriteString(f + "\n") })
	if !strings.Contains(b.String(), "## Limiter: a burst of callers on a busy site") {
		t.Errorf("section:\n%s", b.String())
	}
	if v := r.burstVerdicts(); len(v) != 2 || !strings.Contains(v[1].what, "2 process") {
		t.Errorf("verdicts %+v, want one per process count", v)
	}
	t.Logf("%+v", rows)
}
