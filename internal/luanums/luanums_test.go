package luanums_test

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/luanums"
	"github.com/polite-crawler/polite/internal/redistest"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

// values cover what the scripts pass: flags, counts, ms up to days, server
// ms, fractions, negatives and -1 for "not measured".
var values = []float64{0, 1, -1, 3, 30000, 86400000, 1795721129702, 0.5, -0.0510223723968, 2.5, 1e15, 12.345}

// read runs nums in Redis: the numbers from at, as text (a Lua number
// returned whole would be cut to an integer), by Redis's struct library or
// by the stand-in.
const read = `
local n, at, standin = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4] == '1'
local out
if standin then
  out = {struct_standin().unpack('<' .. string.rep('d', n), ARGV[1], at)}
else
  out = {nums(ARGV[1], n, at)}
end
local s = {}
for i = 1, n do
  s[i] = string.format('%.17g', out[i])
end
s[n + 1] = tostring(out[n + 1]) -- the position after the last
return s
`

func TestNumsReadsPack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb := srv.Client()
	defer rdb.Close()
	packed := luanums.Pack(values...)
	if len(packed) != 8*len(values) {
		t.Fatalf("Pack: %d bytes for %d numbers", len(packed), len(values))
	}
	for _, standin := range []string{"0", "1"} {
		for _, at := range []int{1, 17} { // from the start, and past two numbers
			skip := (at - 1) / 8
			n := len(values) - skip
			got, err := rdb.Eval(ctx, luanums.Lua+read, nil, packed, n, at, standin).StringSlice()
			if err != nil {
				t.Fatalf("standin %s at %d: %v", standin, at, err)
			}
			for i, want := range values[skip:] {
				if f, err := strconv.ParseFloat(got[i], 64); err != nil || f != want {
					t.Errorf("standin %s at %d: number %d = %q, want %v", standin, at, i+1, got[i], want)
				}
			}
			if got[n] != "97" {
				t.Errorf("standin %s at %d: next position %q, want 97", standin, at, got[n])
			}
		}
	}
}

func TestPackIsLittleEndianDoubles(t *testing.T) {
	p := luanums.Pack(1, -2.5)
	want := []uint64{math.Float64bits(1), math.Float64bits(-2.5)}
	for i, w := range want {
		var u uint64
		for j := 7; j >= 0; j-- {
			u = u<<8 | uint64(p[8*i+j])
		}
		if u != w {
			t.Errorf("number %d: bits %x, want %x", i, u, w)
		}
	}
	if luanums.Pack() != "" {
		t.Error("Pack() is not empty")
	}
}

func TestIntText(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb := srv.Client()
	defer rdb.Close()
	for _, x := range []float64{0, 7, -1, 1795721129702, 1e15 + 1795721129702 + 5000, 1 << 53} {
		got, err := rdb.Eval(ctx, luanums.Lua+"return int_text(nums(ARGV[1], 1))", nil, luanums.Pack(x)).Text()
		if want := strconv.FormatFloat(x, 'f', 0, 64); err != nil || got != want {
			t.Errorf("int_text(%v) = %q, %v; want %q", x, got, err, want)
		}
	}
}

// TestNativeStructAsFunctions: loaded as a library of Redis Functions, the
// prelude finds Redis's own struct library, not the slower stand-in.
func TestNativeStructAsFunctions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb := srv.Client()
	defer rdb.Close()
	code := "#!lua name=luanums_test\n" + luanums.Lua + `
redis.register_function('luanums_native', function(keys, args)
  return tostring(packer() == rawget(_G, 'struct') and packer() ~= nil)
end)`
	if err := rdb.FunctionLoadReplace(ctx, code).Err(); err != nil {
		t.Fatalf("FUNCTION LOAD: %v", err)
	}
	defer rdb.FunctionDelete(context.Background(), "luanums_test")
	got, err := rdb.FCall(ctx, "luanums_native", nil).Text()
	if err != nil || got != "true" {
		t.Fatalf("packer is Redis's struct: %q, %v", got, err)
	}
}

// TestPackedReadsAsInts: numbers a script returns with packed, by Redis's
// struct library and by the stand-in, read back by Ints as Redis would
// have made them integers (truncated toward zero); a torn reply is an
// error, not numbers.
func TestPackedReadsAsInts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb := srv.Client()
	defer rdb.Close()
	const reply = `
if ARGV[2] == '1' then packer_lib = struct_standin() end
local v = {nums(ARGV[1], tonumber(ARGV[3]))}
v[#v] = nil -- the position after them
return packed(unpack(v))`
	for _, standin := range []string{"0", "1"} {
		got, err := rdb.Eval(ctx, luanums.Lua+reply, nil, luanums.Pack(values...), standin, len(values)).Text()
		if err != nil {
			t.Fatalf("standin %s: %v", standin, err)
		}
		ints, err := luanums.Ints(got)
		if err != nil {
			t.Fatalf("standin %s: %v", standin, err)
		}
		if len(ints) != len(values) {
			t.Fatalf("standin %s: %d numbers, want %d", standin, len(ints), len(values))
		}
		for i, v := range values {
			if want := int64(v); ints[i] != want {
				t.Errorf("standin %s: number %d = %d, want %d (%v)", standin, i+1, ints[i], want, v)
			}
		}
	}
	if _, err := luanums.Ints(luanums.Pack(1, 2)[:12]); err == nil {
		t.Error("12 bytes read as numbers")
	}
	if _, err := luanums.Ints(luanums.Pack(math.Inf(1))); err == nil {
		t.Error("+Inf read as a whole number")
	}
}
