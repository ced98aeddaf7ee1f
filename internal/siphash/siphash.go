// Package siphash is SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast
// short-input PRF", 2012): a 64-bit hash keyed by 128 secret bits. Without
// the key, nobody can choose inputs that collide, which an unkeyed hash
// such as FNV-1a lets anyone do. The frontier fingerprints URLs with it so
// that a hostile site cannot make its links collide with another URL and
// so have that URL taken for seen.
package siphash

import (
	"encoding/binary"
	"math/bits"
)

// Key is the 128-bit key as two little-endian 64-bit halves, the first 8
// bytes of the key in K0.
type Key struct{ K0, K1 uint64 }

// KeyOf is the key made of the first 16 bytes of b (which must hold 16).
func KeyOf(b []byte) Key {
	return Key{binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])}
}

// Sum64 is SipHash-2-4 of s under k. It does not allocate.
func (k Key) Sum64(s string) uint64 {
	v0 := k.K0 ^ 0x736f6d6570736575
	v1 := k.K1 ^ 0x646f72616e646f6d
	v2 := k.K0 ^ 0x6c7967656e657261
	v3 := k.K1 ^ 0x7465646279746573
	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13) ^ v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16) ^ v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21) ^ v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17) ^ v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	n := len(s)
	for ; len(s) >= 8; s = s[8:] {
		m := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		v3 ^= m
		round()
		round()
		v0 ^= m
	}
	// The last block: the bytes left over, and the length's low byte on top.
	m := uint64(n) << 56
	for i := len(s) - 1; i >= 0; i-- {
		m |= uint64(s[i]) << (8 * i)
	}
	v3 ^= m
	round()
	round()
	v0 ^= m
	v2 ^= 0xff
	round()
	round()
	round()
	round()
	return v0 ^ v1 ^ v2 ^ v3
}
