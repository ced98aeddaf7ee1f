package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Size is a number of bytes. It is written as a whole number of bytes
// (1048576) or with a unit: KiB, MiB, GiB, TiB are powers of 1024 (10MiB),
// kB (or KB), MB, GB, TB powers of 1000 (10MB), B bytes. Units are matched
// without regard to case; a space may come before them. It is a
// flag.Value, so a setting of this type takes units in flags, YAML and
// CRAWLER_* variables alike.
type Size int64

// sizeUnits are the units ParseSize knows, the binary ones first, as
// String prefers them.
var sizeUnits = []struct {
	name string
	n    int64
}{
	{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3}, {"B", 1},
}

// sizeWant is what a bad size is told, after "want".
const sizeWant = "a size such as 10MiB, 512KiB, 1GiB, 10MB or a number of bytes"

// ParseSize reads a Size as the type's comment describes. Negative sizes,
// fractions and sizes past 2^63-1 bytes are errors.
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	num := strings.TrimRight(t, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
	unit := strings.TrimSpace(t[len(num):])
	num = strings.TrimSpace(num)
	mult := int64(1)
	if unit != "" {
		mult = 0
		for _, u := range sizeUnits {
			if strings.EqualFold(unit, u.name) {
				mult = u.n
			}
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if mult == 0 || err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("want %s", sizeWant)
	}
	return Size(n * mult), nil
}

// String writes s with the largest unit that divides it exactly, binary
// ones first (10MiB, 1GiB, 10MB), or as a plain number of bytes.
func (s Size) String() string {
	for _, u := range sizeUnits[:len(sizeUnits)-1] {
		if s != 0 && int64(s)%u.n == 0 {
			return strconv.FormatInt(int64(s)/u.n, 10) + u.name
		}
	}
	return strconv.FormatInt(int64(s), 10)
}

// Set parses v into s (flag.Value).
func (s *Size) Set(v string) error {
	n, err := ParseSize(v)
	if err != nil {
		return err
	}
	*s = n
	return nil
}
