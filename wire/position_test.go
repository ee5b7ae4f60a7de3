package wire

import "testing"

func TestAPositionNamesItsGroupAndZxid(t *testing.T) {
	for _, tc := range []struct {
		group uint64
		zxid  int64
		pos   int64
	}{
		{0, 0, 0},
		{0, 12345, 12345}, // the meta group's are its zxids
		{1, 7, 1<<48 | 7},
		{MaxPositionGroup, 1<<PositionShift - 1, 1<<63 - 1},
	} {
		if got := Position(tc.group, tc.zxid); got != tc.pos {
			t.Errorf("Position(%d, %d) = %#x, want %#x", tc.group, tc.zxid, got, tc.pos)
		}
		if g, z := PositionOf(tc.pos); g != tc.group || z != tc.zxid {
			t.Errorf("PositionOf(%#x) = %d, %d, want %d, %d", tc.pos, g, z, tc.group, tc.zxid)
		}
	}
}
