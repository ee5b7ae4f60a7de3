package quotas

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// The keys of StatsTrack's fields.
const (
	countKey          = "count"
	bytesKey          = "bytes"
	countHardLimitKey = "countHardLimit"
	byteHardLimitKey  = "byteHardLimit"
)

// StatsTrack is ZooKeeper's StatsTrack: a quota's limits, or its usage,
// as key=value pairs. A key that is not set reads as -1, which for a
// limit means none. Keys it does not know are kept, so that what it
// parses it writes again. The zero value is empty and ready to use; a
// StatsTrack shares its pairs with its copies, as a map does.
type StatsTrack struct {
	values map[string]int64
}

// Parse reads s as ZooKeeper's StatsTrack constructor does: pairs
// key=value separated by runs of ',' and ';', an empty value read as -1,
// anything after a second '=' ignored (so "bytes=5=", the form ZooKeeper
// 3.7 writes for an older parser's sake, reads as bytes 5). Where
// ZooKeeper's parser throws (a pair with no value, a value that is not a
// 64-bit integer in ASCII digits, a leading separator) Parse returns an
// error.
func Parse(s string) (StatsTrack, error) {
	var st StatsTrack
	if s == "" {
		return st, nil
	}
	pairs := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' })
	if len(pairs) > 0 && (s[0] == ',' || s[0] == ';') {
		return StatsTrack{}, fmt.Errorf("quota %q: starts with a separator", s)
	}
	for _, pair := range pairs {
		kv := strings.Split(pair, "=")
		for len(kv) > 0 && kv[len(kv)-1] == "" { // Java's split drops trailing empty strings
			kv = kv[:len(kv)-1]
		}
		if len(kv) < 2 {
			return StatsTrack{}, fmt.Errorf("quota %q: %q is not key=value", s, pair)
		}
		v := int64(-1)
		if kv[1] != "" {
			var err error
			if v, err = strconv.ParseInt(kv[1], 10, 64); err != nil {
				return StatsTrack{}, fmt.Errorf("quota %q: the value of %s is not an integer", s, kv[0])
			}
		}
		st.set(kv[0], v)
	}
	return st, nil
}

func (st StatsTrack) get(key string) int64 {
	if v, ok := st.values[key]; ok {
		return v
	}
	return -1
}

func (st *StatsTrack) set(key string, v int64) {
	if st.values == nil {
		st.values = map[string]int64{}
	}
	st.values[key] = v
}

// Count is the soft limit on the number of nodes, or the number of nodes.
func (st StatsTrack) Count() int64 { return st.get(countKey) }

// Bytes is the soft limit on the bytes of data, or the bytes of data.
func (st StatsTrack) Bytes() int64 { return st.get(bytesKey) }

// String writes st as ZooKeeper's StatsTrack.toString does: count and
// bytes first (-1 when not set), then, if other keys are set, an '=' (for
// parsers older than 3.7, which then ignore the rest) and each of them,
// sorted, after a ';': "count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=10".
func (st StatsTrack) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s=%d,%s=%d", countKey, st.Count(), bytesKey, st.Bytes())
	keys := slices.Sorted(maps.Keys(st.values))
	keys = slices.DeleteFunc(keys, func(k string) bool { return k == countKey || k == bytesKey })
	if len(keys) > 0 {
		b.WriteByte('=')
		for _, k := range keys {
			fmt.Fprintf(&b, ";%s=%d", k, st.values[k])
		}
	}
	return b.String()
}

// Usage is the text of a quota's usage node: "count=N,bytes=M", as
// ZooKeeper writes it.
func Usage(count, bytes int64) string { return string(AppendUsage(nil, count, bytes)) }

// AppendUsage appends Usage(count, bytes) to dst.
func AppendUsage(dst []byte, count, bytes int64) []byte {
	dst = append(dst, countKey+"="...)
	dst = strconv.AppendInt(dst, count, 10)
	dst = append(dst, ","+bytesKey+"="...)
	return strconv.AppendInt(dst, bytes, 10)
}
