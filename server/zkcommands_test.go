package server

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// The golden answers below follow ZooKeeper 3.9's source: the text of its
// four-letter words (org.apache.zookeeper.server.command.*Command,
// ServerStats.toString, ServerCnxn.dumpConnectionInfo,
// ZooKeeperServer.dumpConf, WatchManager.dumpWatches,
// ExpiryQueue.dump, LearnerSessionTracker.dumpSessions) and the JSON of
// its AdminServer (admin.Commands, ServerCnxn.getConnectionInfo,
// WatchesSummary.toMap, JsonOutputter's snake_case Jackson output).

const testVersion = "3.9.0-arbor, built on 01/02/2026 15:04 GMT"

func testServerStats() serverStatsResult {
	return serverStatsResult{Version: testVersion, NodeCount: 4, ServerStats: serverStatsView{
		PacketsSent: 9, PacketsReceived: 10, MinLatency: 0, AvgLatency: 0.1235, MaxLatency: 7,
		LastProcessedZxid: 0x1f, DataDirSize: 100, LogDirSize: 100, ServerState: "leader",
		NumAliveClientConnections: 2, Uptime: 5000,
	}}
}

var (
	testBrief = connBrief{RemoteSocketAddress: "127.0.0.1:5000", InterestOps: 1, OutstandingRequests: 0, PacketsReceived: 3, PacketsSent: 2}
	testFull  = connFull{connBrief: testBrief, SessionID: 0x100000000000001, LastOperation: "GETD", Established: 1700000000000,
		SessionTimeout: 30000, LastCxid: 2, LastZxid: 0x1f, LastResponseTime: 1700000001000, LastLatency: 1, MaxLatency: 1}
)

func renderText(r commandResult) string {
	var b bytes.Buffer
	r.writeText(&b)
	return b.String()
}

func TestCommandTexts(t *testing.T) {
	t.Parallel()
	readOnly := testServerStats()
	readOnly.ReadOnly, readOnly.ServerStats.ServerState = true, "read-only"
	for _, tc := range []struct {
		name string
		res  commandResult
		want string
	}{
		{"ruok answers imok, without a newline", ruokResult{}, "imok"},
		{"isro answers rw", readOnlyResult{}, "rw"},
		{"isro answers ro on a read-only member", readOnlyResult{ReadOnly: true}, "ro"},
		{"srvr has ServerStats' lines, then the node count", testServerStats(),
			"Zookeeper version: " + testVersion + "\n" +
				"Latency min/avg/max: 0/0.1235/7\nReceived: 10\nSent: 9\nConnections: 2\nOutstanding: 0\nZxid: 0x1f\nMode: leader\nNode count: 4\n"},
		{"srvr says READ-ONLY mode on a read-only member", readOnly,
			"Zookeeper version: " + testVersion + "\nREAD-ONLY mode; serving only read-only clients\n" +
				"Latency min/avg/max: 0/0.1235/7\nReceived: 10\nSent: 9\nConnections: 2\nOutstanding: 0\nZxid: 0x1f\nMode: read-only\nNode count: 4\n"},
		{"stat lists the clients, briefly, after the version", statsResult{serverStatsResult: testServerStats(), all: []connBrief{testBrief}},
			"Zookeeper version: " + testVersion + "\nClients:\n /127.0.0.1:5000[1](queued=0,recved=3,sent=2)\n\n" +
				"Latency min/avg/max: 0/0.1235/7\nReceived: 10\nSent: 9\nConnections: 2\nOutstanding: 0\nZxid: 0x1f\nMode: leader\nNode count: 4\n"},
		{"stat without clients still has its Clients heading", statsResult{serverStatsResult: testServerStats()},
			"Zookeeper version: " + testVersion + "\nClients:\n\n" +
				"Latency min/avg/max: 0/0.1235/7\nReceived: 10\nSent: 9\nConnections: 2\nOutstanding: 0\nZxid: 0x1f\nMode: leader\nNode count: 4\n"},
		{"cons lists each connection in full, then a blank line", connectionsResult{all: []connFull{testFull}},
			" /127.0.0.1:5000[1](queued=0,recved=3,sent=2,sid=0x100000000000001,lop=GETD,est=1700000000000,to=30000,lcxid=0x2," +
				"lzxid=0x1f,lresp=1700000001000,llat=1,minlat=0,avglat=0,maxlat=1)\n\n"},
		{"mntr is zk_ keys and tab-separated values, averages as Java doubles",
			monitorResult{{"version", testVersion}, {"server_state", "follower"}, {"avg_latency", 0.5}, {"max_latency", int64(3)}, {"min_latency", 0.0}},
			"zk_version\t" + testVersion + "\nzk_server_state\tfollower\nzk_avg_latency\t0.5\nzk_max_latency\t3\nzk_min_latency\t0.0\n"},
		{"conf of a single member: ZooKeeper's keys in its order, then Arbor's", confResult{
			ClientPort: 2181, SecureClientPort: -1, DataDir: "/d", DataLogDir: "/d", DataDirSize: 7, DataLogSize: 7, TickTime: 50,
			MaxClientCnxns: 60, MinSessionTimeout: 2000, MaxSessionTimeout: 60000, ClientPortListenBacklog: -1, ServerID: 1,
			ArborMaxConns: 4096, ArborClientAddress: "127.0.0.1:2281", RequestTimeout: 10000, MaxDataSize: 1048576},
			"clientPort=2181\nsecureClientPort=-1\ndataDir=/d\ndataDirSize=7\ndataLogDir=/d\ndataLogSize=7\ntickTime=50\n" +
				"maxClientCnxns=60\nminSessionTimeout=2000\nmaxSessionTimeout=60000\nclientPortListenBacklog=-1\nserverId=1\n" +
				"arborMaxConns=4096\narborClientAddress=127.0.0.1:2281\nrequestTimeout=10000\nmaxDataSize=1048576\n"},
		{"conf of a cluster member adds the peer ports and type, and the membership last", confResult{
			ClientPort: 2181, SecureClientPort: -1, DataDir: "/d", DataLogDir: "/d", TickTime: 50, ClientPortListenBacklog: -1, ServerID: 2,
			ElectionPort: 2382, QuorumPort: 2382, PeerType: new(int), ElectionTicks: 10,
			membership: []string{"server.1=10.0.0.1:2381:2381:participant;10.0.0.1:2181", "server.2=10.0.0.2:2382:2382:observer"}},
			"clientPort=2181\nsecureClientPort=-1\ndataDir=/d\ndataDirSize=0\ndataLogDir=/d\ndataLogSize=0\ntickTime=50\n" +
				"maxClientCnxns=0\nminSessionTimeout=0\nmaxSessionTimeout=0\nclientPortListenBacklog=-1\nserverId=2\n" +
				"electionPort=2382\nquorumPort=2382\npeerType=0\n" +
				"arborMaxConns=0\narborClientAddress=\nrequestTimeout=0\nmaxDataSize=0\nelectionTicks=10\n" +
				"membership: \nserver.1=10.0.0.1:2381:2381:participant;10.0.0.1:2181\nserver.2=10.0.0.2:2382:2382:observer\n"},
		{"envi is key=value lines under a heading", environmentResult{{"zookeeper.version", testVersion}, {"os.name", "Linux"}},
			"Environment:\nzookeeper.version=" + testVersion + "\nos.name=Linux\n"},
		{"dirs gives both sizes", dirsResult{DatadirSize: 10, LogdirSize: 10}, "datadir_size: 10\nlogdir_size: 10\n"},
		{"wchs counts connections, paths and watches", watchSummaryResult{NumConnections: 2, NumPaths: 3, NumTotalWatches: 5},
			"2 connections watching 3 paths\nTotal watches:5\n"},
		{"wchc lists each session's paths, then a blank line", watchesResult{SessionIDToWatchedPaths: map[int64][]string{
			0x200: {"/b"}, 0x100: {"/a", "/b"}}},
			"0x100\n\t/a\n\t/b\n0x200\n\t/b\n\n"},
		{"wchp lists each path's sessions, then a blank line", watchesByPathResult{PathToSessionIDs: map[string][]int64{
			"/b": {0x100, 0x200}, "/a": {0x100}}},
			"/a\n\t0x100\n/b\n\t0x100\n\t0x200\n\n"},
		{"dump on the member that tracks expiry: the sessions by expiry time", dumpResult{tracks: true, tracked: 2,
			ExpiryTimeToSessionIDs:    map[int64][]int64{1700000004000: {0x100, 0x101}},
			SessionIDToEphemeralPaths: map[int64][]string{0x100: {"/e1", "/e2"}},
			conns:                     map[int64][]string{1700000004000: {"ip: /127.0.0.1:5000 sessionId: 0x100"}}, nconns: 1},
			"SessionTracker dump:\nSession Sets (1)/(2):\n2 expire at Tue Nov 14 22:13:24 UTC 2023:\n\t0x100\n\t0x101\n" +
				"ephemeral nodes dump:\nSessions with Ephemerals (1):\n0x100:\n\t/e1\n\t/e2\n" +
				"Connections dump:\nConnections Sets (1)/(1):\n1 expire at Tue Nov 14 22:13:24 UTC 2023:\n\tip: /127.0.0.1:5000 sessionId: 0x100\n"},
		{"dump on a follower: every session with its timeout, as a learner's tracker", dumpResult{
			sessions:                  []dumpSession{{0x100, 30000}, {0x101, 4000}},
			SessionIDToEphemeralPaths: map[int64][]string{}, conns: map[int64][]string{}},
			"SessionTracker dump:\nGlobal Sessions(2):\n0x100\t30000ms\n0x101\t4000ms\n" +
				"ephemeral nodes dump:\nSessions with Ephemerals (0):\nConnections dump:\nConnections Sets (0)/(0):\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := renderText(tc.res); got != tc.want {
				t.Errorf("text:\n%q\nwant:\n%q", got, tc.want)
			}
		})
	}
}

// TestCommandJSON checks each answer's fields against ZooKeeper's names
// (its CommandsTest's and the AdminServer's documentation), in order,
// with "command" and "error" last.
func TestCommandJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, command string
		res           commandResult
		keys          []string
	}{
		{"ruok has no field of its own", "ruok", ruokResult{}, nil},
		{"is_read_only", "is_read_only", readOnlyResult{}, []string{"read_only"}},
		{"server_stats", "server_stats", testServerStats(), []string{"version", "read_only", "server_stats", "node_count"}},
		{"stats", "stats", statsResult{serverStatsResult: testServerStats(), Connections: []connBrief{testBrief}, SecureConnections: []connBrief{}},
			[]string{"version", "read_only", "server_stats", "node_count", "connections", "secure_connections"}},
		{"connections", "connections", connectionsResult{Connections: []connFull{testFull}, SecureConnections: []connFull{}},
			[]string{"connections", "secure_connections"}},
		{"monitor keeps its keys' order", "monitor", monitorResult{{"version", "v"}, {"server_state", "leader"}, {"avg_latency", 0.5}},
			[]string{"version", "server_state", "avg_latency"}},
		{"configuration starts with ZooKeeper's nine", "configuration", confResult{}, []string{"client_port", "data_dir", "data_log_dir",
			"tick_time", "max_client_cnxns", "min_session_timeout", "max_session_timeout", "server_id", "client_port_listen_backlog",
			"secure_client_port", "data_dir_size", "data_log_size", "arbor_max_conns", "arbor_client_address", "request_timeout", "max_data_size"}},
		{"environment keeps its keys' order", "environment", environmentResult{{"zookeeper.version", "v"}, {"host.name", "h"}},
			[]string{"zookeeper.version", "host.name"}},
		{"dirs", "dirs", dirsResult{}, []string{"datadir_size", "logdir_size"}},
		{"dump", "dump", dumpResult{ExpiryTimeToSessionIDs: map[int64][]int64{}, SessionIDToEphemeralPaths: map[int64][]string{}},
			[]string{"expiry_time_to_session_ids", "session_id_to_ephemeral_paths"}},
		{"watch_summary", "watch_summary", watchSummaryResult{}, []string{"num_connections", "num_paths", "num_total_watches"}},
		{"watches", "watches", watchesResult{}, []string{"session_id_to_watched_paths"}},
		{"watches_by_path", "watches_by_path", watchesByPathResult{}, []string{"path_to_session_ids"}},
		{"leader", "leader", leaderResult{}, []string{"is_leader", "leader_id", "leader_ip"}},
		{"voting_view", "voting_view", votingViewResult{}, []string{"current_config"}},
		{"observers", "observers", observersResult{}, []string{"synced_observers", "observers"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, err := commandJSON(tc.command, tc.res, "")
			if err != nil {
				t.Fatal(err)
			}
			want := append(slices.Clone(tc.keys), "command", "error")
			if got := jsonKeys(t, body); !slices.Equal(got, want) {
				t.Errorf("keys %v, want %v\n%s", got, want, body)
			}
			var m map[string]any
			if err := json.Unmarshal(body, &m); err != nil {
				t.Fatal(err)
			}
			if m["command"] != tc.command || m["error"] != nil {
				t.Errorf("command %v, error %v", m["command"], m["error"])
			}
		})
	}
}

func TestCommandJSONShapes(t *testing.T) {
	t.Parallel()
	t.Run("a connection in full has getConnectionInfo's fields", func(t *testing.T) {
		body, _ := json.Marshal(testFull)
		want := []string{"remote_socket_address", "interest_ops", "outstanding_requests", "packets_received", "packets_sent",
			"session_id", "last_operation", "established", "session_timeout", "last_cxid", "last_zxid", "last_response_time",
			"last_latency", "min_latency", "avg_latency", "max_latency"}
		if got := jsonKeys(t, body); !slices.Equal(got, want) {
			t.Errorf("keys %v, want %v", got, want)
		}
	})
	t.Run("server_stats holds ServerStats' properties", func(t *testing.T) {
		body, _ := json.Marshal(testServerStats().ServerStats)
		for _, k := range []string{"packets_sent", "packets_received", "min_latency", "avg_latency", "max_latency",
			"outstanding_requests", "last_processed_zxid", "data_dir_size", "log_dir_size", "server_state",
			"num_alive_client_connections", "uptime", "provider_null"} {
			if !slices.Contains(jsonKeys(t, body), k) {
				t.Errorf("no %q in %s", k, body)
			}
		}
	})
	t.Run("maps keyed by session id or time have decimal keys", func(t *testing.T) {
		body, _ := commandJSON("dump", dumpResult{ExpiryTimeToSessionIDs: map[int64][]int64{1700000004000: {256}},
			SessionIDToEphemeralPaths: map[int64][]string{256: {"/e"}}}, "")
		var m struct {
			Expiry map[string][]int64  `json:"expiry_time_to_session_ids"`
			Eph    map[string][]string `json:"session_id_to_ephemeral_paths"`
		}
		if err := json.Unmarshal(body, &m); err != nil || !slices.Equal(m.Expiry["1700000004000"], []int64{256}) ||
			!slices.Equal(m.Eph["256"], []string{"/e"}) {
			t.Errorf("%s: %+v, %v", body, m, err)
		}
	})
	t.Run("a voter as VotingViewCommand's QuorumServerView", func(t *testing.T) {
		body, _ := json.Marshal(quorumServerView{ServerAddresses: []string{"a:1"}, ElectionAddresses: []string{"a:1"}, LearnerType: "participant"})
		if got, want := jsonKeys(t, body), []string{"server_addresses", "election_addresses", "client_address", "learner_type"}; !slices.Equal(got, want) {
			t.Errorf("keys %v, want %v", got, want)
		}
	})
	t.Run("a command's own error goes in error, with no other field", func(t *testing.T) {
		body, _ := commandJSON("leader", failedResult("server is not initialized"), "")
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil || len(m) != 2 || m["command"] != "leader" || m["error"] != "server is not initialized" {
			t.Errorf("%s: %v", body, err)
		}
	})
	t.Run("an unknown command answers its name and an error", func(t *testing.T) {
		body, _ := commandJSON("nope", nil, "Unknown command: nope")
		if got := string(body); got != "{\n  \"command\": \"nope\",\n  \"error\": \"Unknown command: nope\"\n}\n" {
			t.Errorf("%q", got)
		}
	})
}

// jsonKeys lists the keys of the JSON object body, in order.
func jsonKeys(t *testing.T, body []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", body)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func TestJavaDouble(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		f    float64
		want string
	}{
		{0, "0.0"}, {2, "2.0"}, {0.5, "0.5"}, {0.1235, "0.1235"}, {12.25, "12.25"}, {0.001, "0.001"},
		{0.0001, "1.0E-4"}, {0.00012, "1.2E-4"}, {1e7, "1.0E7"}, {12345678.5, "1.23456785E7"}, {-1.5, "-1.5"},
	} {
		if got := javaDouble(tc.f); got != tc.want {
			t.Errorf("javaDouble(%v) = %q, want %q", tc.f, got, tc.want)
		}
	}
	if got := round4(1.0 / 3); got != 0.3333 {
		t.Errorf("round4(1/3) = %v", got)
	}
}

// Every command answers by each of ZooKeeper's names for it, and its
// four-letter word by the word.
func TestCommandNames(t *testing.T) {
	t.Parallel()
	for name, primary := range map[string]string{
		"ruok": "ruok", "isro": "is_read_only", "srvr": "server_stats", "stat": "stats", "stats": "stats",
		"mntr": "monitor", "conf": "configuration", "config": "configuration", "cons": "connections",
		"env": "environment", "envi": "environment", "wchs": "watch_summary", "wchc": "watches",
		"wchp": "watches_by_path", "lead": "leader", "obsr": "observers", "voting_view": "voting_view", "dump": "dump", "dirs": "dirs",
	} {
		if c := commandNamed(name); c == nil || c.names[0] != primary {
			t.Errorf("%s: %+v, want %s", name, c, primary)
		}
	}
	for _, w := range []string{"ruok", "isro", "srvr", "stat", "mntr", "conf", "cons", "envi", "wchs", "wchc", "wchp", "dump", "dirs"} {
		if c := commandByWord(w); c == nil || !slices.Contains(c.names, w) {
			t.Errorf("word %s: %+v", w, c)
		}
	}
	for _, w := range otherFourLetterWords {
		if commandByWord(w) != nil || !isFourLetterWord(w) || strings.TrimSpace(w) != w {
			t.Errorf("word %s both answered and not", w)
		}
	}
}
