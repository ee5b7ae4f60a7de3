package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// byteSize is a flag of a size in bytes, written as GOMEMLIMIT is: a
// number with an optional unit, B, KiB, MiB, GiB or TiB ("300MiB").
type byteSize int64

func (s *byteSize) String() string {
	if s == nil || *s == 0 {
		return "0"
	}
	for _, u := range []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if int64(*s)%u.size == 0 {
			return strconv.FormatInt(int64(*s)/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(int64(*s), 10) + "B"
}

func (s *byteSize) Set(v string) error {
	num, unit := v, int64(1)
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			num, unit = n, u.size
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/unit {
		return fmt.Errorf("%q is not a size such as 300MiB", v)
	}
	*s = byteSize(n * unit)
	return nil
}
