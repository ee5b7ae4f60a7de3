package server

import (
	"fmt"
	"net/http"
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

// TestTheHTTPAPISplitsTheMetaGroupForTheSuperuser: POST
// /api/v1/shards/split by name and by hash, refused to anyone else and for
// bad input.
func TestTheHTTPAPISplitsTheMetaGroupAndNamesLeadersForTheSuperuser(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", func(c *Config) { c.SuperDigest = rootDigest })
	for _, tc := range []struct {
		body   string
		auth   []string
		status int
		want   string // in the error, or the new map's shard count
	}{
		{`{"at": "m"}`, nil, http.StatusForbidden, "superuser"},
		{`{"at": "m"}`, []string{"root", "rootpw"}, http.StatusOK, "2"},
		{`{"at": "m"}`, []string{"root", "rootpw"}, http.StatusBadRequest, "starts a range of shard 1"},
		{`{"parent": "/locks"}`, []string{"root", "rootpw"}, http.StatusBadRequest, "not partitioned"},
		{`{"parent": "/locks", "at": "xyz"}`, []string{"root", "rootpw"}, http.StatusBadRequest, "16 hex digits"},
		{`{"at": "m", "extra": 1}`, []string{"root", "rootpw"}, http.StatusBadRequest, "unknown field"},
	} {
		status, out := api(t, s, http.MethodPost, "/api/v1/shards/split", tc.body, tc.auth...)
		got := fmt.Sprint(out["error"])
		if status == http.StatusOK {
			got = fmt.Sprint(len(out["shards"].([]any)))
		}
		if status != tc.status || !strings.Contains(got, tc.want) {
			t.Errorf("POST %s: %d %v, want %d with %q", tc.body, status, out, tc.status, tc.want)
		}
	}
	// And it names a shard's leader: a voter of the cluster, or 0.
	for _, tc := range []struct {
		body   string
		auth   []string
		status int
		want   string // in the error, or shard 1's leader
	}{
		{`{"group": 1, "member": 1}`, nil, http.StatusForbidden, "superuser"},
		{`{"group": 1, "member": 1}`, []string{"root", "rootpw"}, http.StatusOK, "1"},
		{`{"group": 1, "member": 0}`, []string{"root", "rootpw"}, http.StatusOK, "<nil>"},
		{`{"group": 1, "member": 7}`, []string{"root", "rootpw"}, http.StatusBadRequest, "not a voter"},
		{`{"group": 5, "member": 1}`, []string{"root", "rootpw"}, http.StatusBadRequest, "no shard 5"},
		{`{"member": 1}`, []string{"root", "rootpw"}, http.StatusBadRequest, "group is required"},
	} {
		status, out := api(t, s, http.MethodPost, "/api/v1/shards/lead", tc.body, tc.auth...)
		got := fmt.Sprint(out["error"])
		if status == http.StatusOK {
			got = fmt.Sprint(out["shards"].([]any)[1].(map[string]any)["leader"])
		}
		if status != tc.status || !strings.Contains(got, tc.want) {
			t.Errorf("POST lead %s: %d %v, want %d with %q", tc.body, status, out, tc.status, tc.want)
		}
	}
}
