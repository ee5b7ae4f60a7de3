package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/server"
	"github.com/arbor-coord/arbor/wire"
	"github.com/go-zookeeper/zk"
)

// ZooKeeper's commands, both ways: as four-letter words on the ZooKeeper
// port and as the AdminServer's JSON under /commands/ on the http
// listener, each checked against the other and against what the clients
// did.

// command GETs /commands/name from the member's http listener, as user
// (basic auth; "" for none), and returns the decoded JSON answer. Every
// answer, an unknown command's too, is 200 and JSON, as ZooKeeper's.
func command(t *testing.T, s *server.Server, name, user, password string) map[string]any {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+s.HTTPAddr().String()+"/commands/"+name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("/commands/%s: %s (%s): %s", name, resp.Status, resp.Header.Get("Content-Type"), body)
	}
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber() // session ids need all 64 bits
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("/commands/%s: %v: %s", name, err, body)
	}
	if _, ok := m["error"]; !ok {
		t.Fatalf("/commands/%s has no error field: %s", name, body)
	}
	return m
}

// mntrValues parses a mntr answer.
func mntrValues(text string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		k, v, _ := strings.Cut(line, "\t")
		out[k] = v
	}
	return out
}

// num is a JSON number as an int64, for comparisons with the text.
func num(v any) int64 {
	n, _ := v.(json.Number)
	i, _ := n.Int64()
	return i
}

func TestZooKeeperCommandsAnswerAsWordsAndOverHTTP(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "", withZK, withHTTP, func(cfg *server.Config) { cfg.SuperDigest = client.DigestID("super", "test") })
	zkAddr := s.ZKAddr().String()
	word := func(w string) string { t.Helper(); return fourLetterWord(t, zkAddr, w) }
	zc := dialZK(t, []string{zkAddr}, 5*time.Second)
	open := zk.WorldACL(zk.PermAll)
	if err := zc.AddAuth("digest", []byte("alice:pw")); err != nil {
		t.Fatal(err)
	}
	for _, n := range []struct {
		path  string
		flags int32
		acl   []zk.ACL
	}{
		{"/open", 0, open}, {"/open/eph", zk.FlagEphemeral, open},
		{"/private", 0, zk.DigestACL(zk.PermAll, "alice", "pw")}, {"/private/eph", zk.FlagEphemeral, zk.DigestACL(zk.PermAll, "alice", "pw")},
	} {
		if _, err := zc.Create(n.path, nil, n.flags, n.acl); err != nil {
			t.Fatalf("create %s: %v", n.path, err)
		}
	}
	for _, p := range []string{"/open", "/private"} {
		if _, _, _, err := zc.GetW(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"/open/missing", "/private/missing"} {
		if _, _, _, err := zc.ExistsW(p); err != nil {
			t.Fatal(err)
		}
	}
	sid := zc.SessionID()
	hexID, decID := fmt.Sprintf("0x%x", sid), strconv.FormatInt(sid, 10)

	t.Run("ruok and isro", func(t *testing.T) {
		if got := word("ruok"); got != "imok" {
			t.Errorf("ruok = %q", got)
		}
		if m := command(t, s, "ruok", "", ""); m["command"] != "ruok" || m["error"] != nil || len(m) != 2 {
			t.Errorf("/commands/ruok = %v", m)
		}
		if m := command(t, s, "isro", "", ""); m["command"] != "is_read_only" || m["read_only"] != false {
			t.Errorf("/commands/isro = %v", m)
		}
	})
	t.Run("mntr and monitor report the same tree", func(t *testing.T) {
		text := mntrValues(word("mntr"))
		m := command(t, s, "mntr", "", "")
		if m["command"] != "monitor" {
			t.Errorf("command %v", m["command"])
		}
		// the root, /open, /open/eph, /private, /private/eph: 1+5+9+8+12
		// bytes of paths, no data; and the system nodes, /zookeeper,
		// /zookeeper/quota, /zookeeper/config: 10+16+17
		// And, sharded, the map's node.
		var mapSize int64
		if mapNode() > 0 {
			data, _, err := zc.Get(wire.ShardsPath)
			if err != nil {
				t.Fatal(err)
			}
			mapSize = int64(len(wire.ShardsPath) + len(data))
		}
		for k, want := range map[string]int64{"znode_count": 8 + int64(mapNode()), "ephemerals_count": 2, "watch_count": 4,
			"global_sessions": 1, "approximate_data_size": 35 + 43 + mapSize} {
			if text["zk_"+k] != strconv.FormatInt(want, 10) || num(m[k]) != want {
				t.Errorf("%s: mntr %q, monitor %v, want %d", k, text["zk_"+k], m[k], want)
			}
		}
		if text["zk_server_state"] != "standalone" || m["server_state"] != "standalone" {
			t.Errorf("server state: mntr %q, monitor %v", text["zk_server_state"], m["server_state"])
		}
		if _, ok := text["zk_max_file_descriptor_count"]; !ok {
			t.Errorf("mntr has no zk_max_file_descriptor_count: %v", text)
		}
		if _, ok := text["zk_peer_state"]; ok {
			t.Error("a single member reports a peer state")
		}
	})
	t.Run("srvr and server_stats", func(t *testing.T) {
		srvr, ok := zk.FLWSrvr([]string{zkAddr}, 2*time.Second)
		if !ok || srvr[0].Mode != zk.ModeStandalone || srvr[0].NodeCount != int64(8+mapNode()) {
			t.Errorf("srvr = %+v (%q)", srvr[0], word("srvr"))
		}
		m := command(t, s, "srvr", "", "")
		st, _ := m["server_stats"].(map[string]any)
		if m["command"] != "server_stats" || num(m["node_count"]) != int64(8+mapNode()) || st["server_state"] != "standalone" ||
			num(st["packets_received"]) == 0 || num(st["data_dir_size"]) == 0 || m["read_only"] != false {
			t.Errorf("/commands/srvr = %v", m)
		}
		if !strings.HasPrefix(m["version"].(string), "3.9.0-arbor") {
			t.Errorf("version %v", m["version"])
		}
	})
	t.Run("stat, cons and connections list the client", func(t *testing.T) {
		if got := word("stat"); !strings.Contains(got, "Clients:\n /127.0.0.1:") {
			t.Errorf("stat = %q", got)
		}
		cons, ok := zk.FLWCons([]string{zkAddr}, 2*time.Second)
		if !ok || len(cons[0].Clients) != 1 || cons[0].Clients[0].SessionID != sid || cons[0].Clients[0].Timeout != 5000 {
			t.Errorf("cons = %+v (%q)", cons[0], word("cons"))
		}
		m := command(t, s, "cons", "", "")
		conns, _ := m["connections"].([]any)
		if m["command"] != "connections" || len(conns) != 1 || m["secure_connections"] == nil {
			t.Fatalf("/commands/cons = %v", m)
		}
		c := conns[0].(map[string]any)
		if num(c["session_id"]) != sid || num(c["session_timeout"]) != 5000 || num(c["packets_received"]) == 0 ||
			!strings.HasPrefix(c["remote_socket_address"].(string), "127.0.0.1:") || c["last_operation"] == "" {
			t.Errorf("the connection: %v", c)
		}
		m = command(t, s, "stat", "", "")
		if conns, _ := m["connections"].([]any); m["command"] != "stats" || len(conns) != 1 || m["server_stats"] == nil {
			t.Errorf("/commands/stat = %v", m)
		}
	})
	t.Run("conf, dirs and envi", func(t *testing.T) {
		_, port, _ := net.SplitHostPort(zkAddr)
		if got := word("conf"); !strings.HasPrefix(got, "clientPort="+port+"\nsecureClientPort=-1\ndataDir=") ||
			!strings.Contains(got, "\nserverId=1\n") {
			t.Errorf("conf = %q", got)
		}
		m := command(t, s, "conf", "", "")
		if m["command"] != "configuration" || strconv.FormatInt(num(m["client_port"]), 10) != port || num(m["server_id"]) != 1 {
			t.Errorf("/commands/conf = %v", m)
		}
		if got := word("dirs"); !strings.HasPrefix(got, "datadir_size: ") || strings.HasPrefix(got, "datadir_size: 0\n") {
			t.Errorf("dirs = %q", got)
		}
		if m := command(t, s, "envi", "", ""); m["command"] != "environment" || !strings.HasPrefix(m["zookeeper.version"].(string), "3.9.0-arbor") {
			t.Errorf("/commands/envi = %v", m)
		}
	})
	t.Run("wchs, wchc and wchp list the watches, only the paths the asker may read", func(t *testing.T) {
		if got := word("wchs"); got != "1 connections watching 4 paths\nTotal watches:4\n" {
			t.Errorf("wchs = %q", got)
		}
		if m := command(t, s, "wchs", "", ""); num(m["num_connections"]) != 1 || num(m["num_paths"]) != 4 || num(m["num_total_watches"]) != 4 {
			t.Errorf("/commands/wchs = %v", m)
		}
		// A word's asker is its address: it may read /open only.
		if got, want := word("wchc"), hexID+"\n\t/open\n\t/open/missing\n\n"; got != want {
			t.Errorf("wchc = %q, want %q", got, want)
		}
		if got, want := word("wchp"), "/open\n\t"+hexID+"\n/open/missing\n\t"+hexID+"\n\n"; got != want {
			t.Errorf("wchp = %q, want %q", got, want)
		}
		byAnyone := command(t, s, "wchc", "", "")["session_id_to_watched_paths"]
		if got := fmt.Sprint(byAnyone); got != "map["+decID+":[/open /open/missing]]" {
			t.Errorf("/commands/wchc to anyone = %s", got)
		}
		bySuper := command(t, s, "watches", "super", "test")["session_id_to_watched_paths"]
		if got := fmt.Sprint(bySuper); got != "map["+decID+":[/open /open/missing /private /private/missing]]" {
			t.Errorf("/commands/watches to the superuser = %s", got)
		}
		byPath := command(t, s, "wchp", "alice", "pw")["path_to_session_ids"].(map[string]any)
		if len(byPath) != 4 || num(byPath["/private/missing"].([]any)[0]) != sid {
			t.Errorf("/commands/wchp to alice = %v", byPath)
		}
	})
	t.Run("dump lists the ephemerals, only those the asker may read", func(t *testing.T) {
		dump := word("dump")
		for _, want := range []string{"SessionTracker dump:\nSession Sets (1)/(1):\n", "\t" + hexID + "\n",
			"ephemeral nodes dump:\nSessions with Ephemerals (1):\n" + hexID + ":\n\t/open/eph\nConnections dump:",
			"Connections dump:\nConnections Sets (1)/(1):\n", "sessionId: " + hexID + "\n"} {
			if !strings.Contains(dump, want) {
				t.Errorf("dump lacks %q:\n%s", want, dump)
			}
		}
		m := command(t, s, "dump", "", "")
		if got := fmt.Sprint(m["session_id_to_ephemeral_paths"]); got != "map["+decID+":[/open/eph]]" {
			t.Errorf("/commands/dump's ephemerals to anyone: %s", got)
		}
		expiry, _ := m["expiry_time_to_session_ids"].(map[string]any)
		if len(expiry) != 1 || !strings.Contains(fmt.Sprint(expiry), decID) {
			t.Errorf("/commands/dump's expiry: %v", expiry)
		}
		if got := fmt.Sprint(command(t, s, "dump", "alice", "pw")["session_id_to_ephemeral_paths"]); got != "map["+decID+":[/open/eph /private/eph]]" {
			t.Errorf("/commands/dump's ephemerals to alice: %s", got)
		}
	})
	t.Run("the cluster's commands on a single member", func(t *testing.T) {
		if m := command(t, s, "leader", "", ""); m["error"] != "server is not initialized" || m["command"] != "leader" {
			t.Errorf("/commands/leader = %v", m)
		}
		if m := command(t, s, "voting_view", "", ""); fmt.Sprint(m["current_config"]) != "map[]" {
			t.Errorf("/commands/voting_view = %v", m)
		}
		if m := command(t, s, "obsr", "", ""); num(m["synced_observers"]) != 0 || fmt.Sprint(m["observers"]) != "[]" {
			t.Errorf("/commands/obsr = %v", m)
		}
	})
	t.Run("an unknown command, the list, other methods and hosts", func(t *testing.T) {
		if m := command(t, s, "snapshot", "", ""); m["command"] != "snapshot" || m["error"] != "Unknown command: snapshot" {
			t.Errorf("/commands/snapshot = %v", m)
		}
		base := "http://" + s.HTTPAddr().String()
		resp, err := http.Get(base + "/commands")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, name := range []string{"monitor", "server_stats", "stats", "configuration", "connections", "watches", "watches_by_path",
			"watch_summary", "dump", "is_read_only", "environment", "leader", "voting_view", "observers", "ruok", "dirs"} {
			if !strings.Contains(string(body), `<a href="/commands/`+name+`">`+name+"</a>\n<br/>\n") {
				t.Errorf("/commands does not link %s:\n%s", name, body)
			}
		}
		resp, err = http.Post(base+"/commands/mntr", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("POST /commands/mntr: %s", resp.Status)
		}
		req, _ := http.NewRequest("GET", base+"/commands/mntr", nil)
		req.Host = "attacker.example"
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("/commands/mntr named by a foreign host: %s", resp.Status)
		}
	})
}

// In a cluster of three voters and an observer, each member reports its
// role as ZooKeeper's would: mntr's states and the leader's synced
// learners, the leader command, the voting view, the observers, the
// membership in conf.
func TestZooKeeperCommandsInACluster(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 4, withZK, withHTTP, func(cfg *server.Config) { cfg.Observers = []uint64{4} })
	lead := c.leader()
	waitUntil(t, "the leader to hear its three learners", patience, func() bool {
		m := command(t, c.servers[lead], "mntr", "", "")
		return num(m["synced_followers"]) == 2 && num(m["synced_observers"]) == 1
	})
	// Each member's ZooKeeper address, in the voting view and conf, comes
	// from its card.
	waitUntil(t, "every member to have every card", patience, func() bool {
		for _, s := range c.servers {
			voters := command(t, s, "voting_view", "", "")["current_config"].(map[string]any)
			if len(voters) != 3 {
				return false
			}
			for _, v := range voters {
				if v.(map[string]any)["client_address"] == "" {
					return false
				}
			}
			if strings.Count(fourLetterWord(t, s.ZKAddr().String(), "conf"), ";127.0.0.1:") != 4 {
				return false
			}
		}
		return true
	})
	for id, s := range c.servers {
		zkAddr := s.ZKAddr().String()
		role, peerState := "follower", "following - broadcast"
		switch id {
		case lead:
			role, peerState = "leader", "leading - broadcast"
		case 4:
			role, peerState = "observer", "observing - broadcast"
		}
		t.Run(fmt.Sprintf("member %d, the %s", id, role), func(t *testing.T) {
			text := mntrValues(fourLetterWord(t, zkAddr, "mntr"))
			if text["zk_server_state"] != role || text["zk_peer_state"] != peerState || text["zk_quorum_size"] != "3" {
				t.Errorf("mntr: %v", text)
			}
			_, synced := text["zk_synced_followers"]
			if synced != (id == lead) {
				t.Errorf("mntr has zk_synced_followers: %v, want it on the leader alone", synced)
			}
			if id == lead && (text["zk_learners"] != "3" || text["zk_synced_followers"] != "2" || text["zk_synced_observers"] != "1") {
				t.Errorf("the leader's learners: %v", text)
			}
			if _, ok := text["zk_observer_master_id"]; ok != (id == 4) || (id == 4 && text["zk_observer_master_id"] != strconv.FormatUint(lead, 10)) {
				t.Errorf("zk_observer_master_id: %q", text["zk_observer_master_id"])
			}
			if got := fourLetterWord(t, zkAddr, "srvr"); !strings.Contains(got, "\nMode: "+role+"\n") {
				t.Errorf("srvr: %q", got)
			}

			m := command(t, s, "leader", "", "")
			if m["is_leader"] != (id == lead) || num(m["leader_id"]) != int64(lead) || m["leader_ip"] != "127.0.0.1" || m["error"] != nil {
				t.Errorf("/commands/leader = %v", m)
			}
			voters := command(t, s, "voting_view", "", "")["current_config"].(map[string]any)
			if len(voters) != 3 || voters["4"] != nil {
				t.Errorf("/commands/voting_view = %v, want the three voters", voters)
			}
			for vid, v := range voters {
				n, _ := strconv.ParseUint(vid, 10, 64)
				v := v.(map[string]any)
				peer := c.cfgs[n].Peers[n]
				if v["client_address"] != c.servers[n].ZKAddr().String() || v["learner_type"] != "participant" ||
					fmt.Sprint(v["server_addresses"]) != "["+peer+"]" || fmt.Sprint(v["election_addresses"]) != "["+peer+"]" {
					t.Errorf("voter %s: %v", vid, v)
				}
			}
			obs := command(t, s, "observers", "", "")
			if want := map[bool]string{true: "1 [map[sid:4]]", false: "0 []"}[id == lead]; fmt.Sprint(num(obs["synced_observers"]), " ", obs["observers"]) != want {
				t.Errorf("/commands/observers = %v, want %s", obs, want)
			}

			// conf ends with /zookeeper/config's text, which lists each
			// member once it has named itself (about a second).
			_, peerPort, _ := net.SplitHostPort(c.cfgs[id].Peers[id])
			peerType := map[bool]string{true: "1", false: "0"}[id == 4]
			wants := []string{"\nelectionPort=" + peerPort + "\nquorumPort=" + peerPort + "\npeerType=" + peerType + "\n",
				"\nmembership: \n", "server.4=" + c.cfgs[4].Peers[4] + ":0:observer;" + c.servers[4].ZKAddr().String() + "\n",
				"server.1=" + c.cfgs[1].Peers[1] + ":0:participant;" + c.servers[1].ZKAddr().String() + "\n", "\nversion="}
			var conf string
			waitUntil(t, "conf to list every member", 10*time.Second, func() bool {
				conf = fourLetterWord(t, zkAddr, "conf")
				return !slices.ContainsFunc(wants, func(w string) bool { return !strings.Contains(conf, w) })
			})
			dumpHead := map[bool]string{true: "SessionTracker dump:\nSession Sets (", false: "SessionTracker dump:\nGlobal Sessions("}[id == lead]
			if got := fourLetterWord(t, zkAddr, "dump"); !strings.HasPrefix(got, dumpHead) {
				t.Errorf("dump: %q", got)
			}
		})
	}
}

// A member that serves no clients (cut off, read-only mode off) answers
// ZooKeeper's "not currently serving" to the commands that need a server,
// as a word and over http; ruok, envi and monitor still answer.
func TestZooKeeperCommandsOfAMemberThatServesNoClients(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, withZK, withHTTP, func(cfg *server.Config) { cfg.NoReadOnly = true })
	cut := c.follower()
	var rest []uint64
	for id := range c.servers {
		if id != cut {
			rest = append(rest, id)
		}
	}
	s := c.servers[cut]
	zkAddr := s.ZKAddr().String()
	c.partition([]uint64{cut}, rest)
	const notServing = "This ZooKeeper instance is not currently serving requests\n"
	waitUntil(t, "the cut-off member to stop serving", patience, func() bool { return fourLetterWord(t, zkAddr, "srvr") == notServing })
	for _, w := range []string{"stat", "mntr", "conf", "cons", "wchs", "wchc", "wchp", "dump", "dirs"} {
		if got := fourLetterWord(t, zkAddr, w); got != notServing {
			t.Errorf("%s = %q", w, got)
		}
	}
	if got := fourLetterWord(t, zkAddr, "isro"); got != "null" {
		t.Errorf("isro = %q", got)
	}
	if got := fourLetterWord(t, zkAddr, "ruok"); got != "imok" {
		t.Errorf("ruok = %q", got)
	}
	if got := fourLetterWord(t, zkAddr, "envi"); !strings.HasPrefix(got, "Environment:\n") {
		t.Errorf("envi = %q", got)
	}
	for _, name := range []string{"srvr", "ruok", "leader", "dump"} {
		if m := command(t, s, name, "", ""); m["error"] != strings.TrimSuffix(notServing, "\n") || m["command"] != name {
			t.Errorf("/commands/%s = %v", name, m)
		}
	}
	if m := command(t, s, "monitor", "", ""); m["server_state"] != "looking" || m["peer_state"] != "looking" || m["error"] != nil {
		t.Errorf("/commands/monitor = %v", m)
	}
}
