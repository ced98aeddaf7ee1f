package limiter

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/polite-crawler/polite/internal/luanums"
)

// TestReleaseReplyReadsNumbersAndIDs: release.lua's one-string reply is
// its 12 numbers and the ids it published; a torn reply is an error, not
// a release.
func TestReleaseReplyReadsNumbersAndIDs(t *testing.T) {
	nums := []float64{1, 250, 3, 4, 2, 0, 0, 1, 1795765408489, 2, 3, 0}
	n, ids, err := releaseReply(luanums.Pack(nums...) + "ab12.7 ab12.9")
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range nums {
		if n[i] != int64(want) {
			t.Errorf("number %d = %d, want %v", i, n[i], want)
		}
	}
	if !slices.Equal(ids, []string{"ab12.7", "ab12.9"}) {
		t.Errorf("ids %q", ids)
	}
	if _, ids, err := releaseReply(luanums.Pack(nums...)); err != nil || len(ids) != 0 {
		t.Errorf("no ids: %q, %v", ids, err)
	}
	for _, torn := range []string{"", luanums.Pack(nums[:11]...), luanums.Pack(nums...)[:95]} {
		if _, _, err := releaseReply(torn); err == nil {
			t.Errorf("a reply of %d bytes read as a release", len(torn))
		}
	}
}

// release.lua's tail_base cuts the wake-up channels' base from behind the
// controller's parameters at PARAMS_LEN: it must be their length, or
// every wake-up goes to a wrong channel (and waiters only poll).
func TestParamsLenMatchesLua(t *testing.T) {
	n := len((&Adaptive{}).params())
	if want := fmt.Sprintf("local PARAMS_LEN = %d * 8", n/8); n%8 != 0 || !strings.Contains(adaptiveLua, want) {
		t.Fatalf("Adaptive.params is %d bytes; adaptive.lua lacks %q", n, want)
	}
}
