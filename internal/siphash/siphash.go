// Package siphash is SipHash-2-4 (Aumasson and Bernstein, 2012), a keyed
// 64-bit hash: without the key, nobody can tell which inputs collide, so a
// hostile site cannot make URLs that collide with others on purpose, as it
// can under an unkeyed hash such as FNV.
//
// Its output is 64 bits: it keeps outsiders from choosing collisions, but
// is too short to authenticate messages against a determined forger. The
// key must be secret and random (16 bytes from crypto/rand).
package siphash

import (
	"encoding/binary"
	"math/bits"
)

// KeySize is the length of a key in bytes.
const KeySize = 16

// Key is a SipHash key: its two 64-bit halves, little-endian.
type Key struct{ k0, k1 uint64 }

// NewKey is the key of the 16 bytes b; it panics when len(b) != KeySize.
func NewKey(b []byte) Key {
	if len(b) != KeySize {
		panic("siphash: key is not 16 bytes")
	}
	return Key{binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])}
}

// Sum64 is the SipHash-2-4 of s under k.
func (k Key) Sum64(s string) uint64 {
	v0 := k.k0 ^ 0x736f6d6570736575
	v1 := k.k1 ^ 0x646f72616e646f6d
	v2 := k.k0 ^ 0x6c7967656e657261
	v3 := k.k1 ^ 0x7465646279746573
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
	// The last block: what is left of s, and the length's low byte on top.
	m := uint64(n) << 56
	for i := range len(s) {
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
