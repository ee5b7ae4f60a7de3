package server

import (
	"strings"
	"testing"
)

// TestTheMapChangesOnlyOnceEveryMemberSaysItKnowsMaps: a member of an
// older version would refuse the map's txn that the others apply.
func TestTheMapChangesOnlyOnceEveryMemberSaysItKnowsMaps(t *testing.T) {
	t.Parallel()
	peers := map[uint64]string{1: freeAddr(t), 2: freeAddr(t), 3: freeAddr(t)}
	s := startServer(t, "", func(c *Config) { c.Peers, c.HTTP = peers, "-" })
	card := func(c memberCard) []byte { return encodeCard(t, c) }
	refused := func(want string) {
		t.Helper()
		err := s.everyMemberKnows(featureShardMap)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("everyMemberKnows: %v, want %q", err, want)
		}
	}
	refused("members [2 3] have not said")
	s.takeCard(2, card(memberCard{ID: 2, Features: []string{featureShardMap}}))
	s.takeCard(3, card(memberCard{ID: 3})) // a member of a version before maps
	refused("members [3] have not said")
	s.takeCard(3, card(memberCard{ID: 3, Features: []string{"something else", featureShardMap}}))
	refused("")
	if c := s.ownCard(); !strings.Contains(strings.Join(c.Features, " "), featureShardMap) {
		t.Errorf("this member's own card says it knows %v", c.Features)
	}
}
