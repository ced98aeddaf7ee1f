// Package luanums passes numbers to Lua scripts in one argument: Go packs
// them as little-endian IEEE 754 doubles (Pack), the script reads them with
// one call of Redis's struct library (nums in Lua).
//
// Each number passed as an argument of its own costs Redis 7.0 about 2,000
// instructions (measured under callgrind): some 1,000 to carry the string
// in, some 1,000 for the strtod behind Lua's tonumber. A script called on
// every page with a dozen numbers spends more on its arguments than on
// several of its commands.
package luanums

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"math"
)

// Lua defines nums(s, n, at), which returns the n numbers packed in string
// s from its byte at (1 when nil), followed, as struct.unpack's results
// are, by the position after them (so a call of nums last in an argument
// list passes one argument more: assign it first); packer(), Redis's
// struct library or, in a Lua without one (miniredis), a stand-in for the
// formats '<', 'B' and 'd'; packed(...), its numbers as one string in
// Pack's format, for a reply (Ints reads it); and int_text(x), a whole
// number as text for a command (cheaper than Redis's own formatting of a
// number argument).
// Prepend it to a script that uses them; it only defines, so it may be part
// of a library's prelude (internal/luafn).
//
//go:embed luanums.lua
var Lua string

// Pack is v as nums reads it: 8 bytes a number. Integers up to 2^53 and
// every finite double pass exactly; the stand-in of a Lua without struct
// also needs them normal or zero (no subnormals, no infinities or NaNs).
func Pack(v ...float64) string {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return string(b)
}

// Ints reads numbers a script packed (packed in Lua, Pack's format) as
// whole numbers, each truncated toward zero as Redis turns a Lua number
// into an integer reply. A string whose length is not a multiple of 8 is
// an error; so is a number that is not finite or lies outside ±2^63.
func Ints(s string) ([]int64, error) {
	if len(s)%8 != 0 {
		return nil, fmt.Errorf("luanums: %d bytes is no whole number of packed numbers", len(s))
	}
	b := []byte(s)
	v := make([]int64, len(b)/8)
	for i := range v {
		x := math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		if math.IsNaN(x) || x >= 1<<63 || x < -(1<<63) {
			return nil, fmt.Errorf("luanums: number %d is %v, not a whole number within ±2^63", i+1, x)
		}
		v[i] = int64(x)
	}
	return v, nil
}
