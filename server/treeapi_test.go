package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/wire"
)

func TestTheTreeAPIReadsAndWritesNodes(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", func(c *Config) { c.MaxDataSize = 1024 })
	type step struct {
		name         string
		method, path string
		body         any
		want         int
		check        func(t *testing.T, v map[string]any)
	}
	field := func(k string, want any) func(t *testing.T, v map[string]any) {
		return func(t *testing.T, v map[string]any) {
			t.Helper()
			if fmt.Sprint(v[k]) != fmt.Sprint(want) {
				t.Errorf("%s = %v, want %v (answer %v)", k, v[k], want, v)
			}
		}
	}
	for _, st := range []step{
		{"create", "POST", "/api/v1/tree/app", map[string]any{"data": `{"a":1}`}, 201, field("path", "/app")},
		{"create a child", "POST", "/api/v1/tree/app/x", map[string]any{"data": "hello"}, 201, nil},
		{"create binary", "POST", "/api/v1/tree/app/bin", map[string]any{"data": base64.StdEncoding.EncodeToString([]byte{0xff, 0}), "encoding": "base64"}, 201, nil},
		{"create sequential", "POST", "/api/v1/tree/app/seq-", map[string]any{"mode": "sequential"}, 201, field("path", "/app/seq-0000000002")},
		{"create again", "POST", "/api/v1/tree/app", map[string]any{}, 409, nil},
		{"create without parent", "POST", "/api/v1/tree/none/x", map[string]any{}, 404, nil},
		{"create an ephemeral", "POST", "/api/v1/tree/e", map[string]any{"mode": "ephemeral"}, 400, nil},
		{"read json", "GET", "/api/v1/tree/app", nil, 200, func(t *testing.T, v map[string]any) {
			field("format", "json")(t, v)
			field("children_total", 3)(t, v)
			if cs := v["children"].([]any); len(cs) != 3 || cs[1].(map[string]any)["sequential"] != true {
				t.Errorf("children %v: want bin, seq-0000000002 (sequential), x", cs)
			}
		}},
		{"read text", "GET", "/api/v1/tree/app/x", nil, 200, field("format", "text")},
		{"read binary", "GET", "/api/v1/tree/app/bin", nil, 200, field("format", "binary")},
		{"a page of children", "GET", "/api/v1/tree/app?offset=2&limit=1", nil, 200, func(t *testing.T, v map[string]any) {
			if cs := v["children"].([]any); len(cs) != 1 || cs[0].(map[string]any)["name"] != "x" {
				t.Errorf("children %v: want x alone", cs)
			}
		}},
		{"a page too long", "GET", "/api/v1/tree/app?limit=100000", nil, 400, nil},
		{"read the root", "GET", "/api/v1/tree", nil, 200, field("path", "/")},
		{"read a missing node", "GET", "/api/v1/tree/nope", nil, 404, nil},
		{"read an invalid path", "GET", "/api/v1/tree/app/", nil, 400, nil},
		{"set", "PUT", "/api/v1/tree/app/x", map[string]any{"data": "v1", "version": 0}, 200, nil},
		{"set at a stale version", "PUT", "/api/v1/tree/app/x", map[string]any{"data": "v2", "version": 0}, 409, func(t *testing.T, v map[string]any) {
			if !strings.Contains(fmt.Sprint(v["error"]), "conflict") {
				t.Errorf("error %q does not say conflict", v["error"])
			}
		}},
		{"set without a version", "PUT", "/api/v1/tree/app/x", map[string]any{"data": "v2"}, 400, nil},
		{"set too much data", "PUT", "/api/v1/tree/app/x", map[string]any{"data": strings.Repeat("x", 2000), "version": -1}, 413, nil},
		{"set bad base64", "PUT", "/api/v1/tree/app/x", map[string]any{"data": "!!", "encoding": "base64", "version": -1}, 400, nil},
		{"set with an unknown field", "PUT", "/api/v1/tree/app/x", map[string]any{"data": "v", "version": -1, "mode": 1}, 400, nil},
		{"the stale set changed nothing", "GET", "/api/v1/tree/app/x", nil, 200, field("data", base64.StdEncoding.EncodeToString([]byte("v1")))},
		{"delete a node with children", "DELETE", "/api/v1/tree/app", nil, 409, nil},
		{"delete at a stale version", "DELETE", "/api/v1/tree/app/x?version=0", nil, 409, nil},
		{"delete at a bad version", "DELETE", "/api/v1/tree/app/x?version=z", nil, 400, nil},
		{"delete the root", "DELETE", "/api/v1/tree/?recursive=true", nil, 400, nil},
		{"delete recursively at a stale version", "DELETE", "/api/v1/tree/app?recursive=true&version=5", nil, 409, nil},
		{"the refused recursive delete deleted nothing", "GET", "/api/v1/tree/app", nil, 200, field("children_total", 3)},
		{"delete at a version past int32", "DELETE", "/api/v1/tree/app/x?version=4294967296", nil, 400, nil},
		{"create the root", "POST", "/api/v1/tree/", map[string]any{}, 409, nil},
		{"delete recursively", "DELETE", "/api/v1/tree/app?recursive=true&version=0", nil, 200, field("deleted", 4)},
		{"deleted", "GET", "/api/v1/tree/app", nil, 404, nil},
		{"a method the tree has not", "PATCH", "/api/v1/tree/app", nil, 405, nil},
	} {
		code, v := api(t, s, st.method, st.path, st.body)
		if code != st.want {
			t.Errorf("%s: %s %s answered %d %v, want %d", st.name, st.method, st.path, code, v, st.want)
			continue
		}
		if code >= 400 && v["error"] == nil {
			t.Errorf("%s: a %d without an error: %v", st.name, code, v)
		}
		if st.check != nil {
			st.check(t, v)
		}
	}
}

func TestTheTreeAPIGoesThroughACLs(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	c := dialRaw(t, s)
	c.connect(wire.ConnectRequest{TimeoutMs: 10_000})
	if r := c.call(wire.Request{Op: wire.OpAuth, AuthScheme: "digest", AuthData: []byte("alice:pw")}); r.Err != wire.CodeOK {
		t.Fatalf("auth: %v", r.Err)
	}
	if r := c.call(wire.Request{Op: wire.OpCreate, Path: "/mine", Data: []byte("secret"),
		ACL: []wire.ACL{{Perms: wire.PermAll, Scheme: "auth"}}}); r.Err != wire.CodeOK {
		t.Fatalf("create: %v", r.Err)
	}
	if code, _ := api(t, s, "GET", "/api/v1/tree/mine", nil); code != http.StatusForbidden {
		t.Errorf("anyone read alice's node: %d", code)
	}
	if code, _ := api(t, s, "PUT", "/api/v1/tree/mine", map[string]any{"data": "x", "version": -1}, "bob", "pw"); code != http.StatusForbidden {
		t.Errorf("bob set alice's node: %d", code)
	}
	if code, v := api(t, s, "GET", "/api/v1/tree/mine", nil, "alice", "pw"); code != 200 || v["format"] != "text" {
		t.Errorf("alice could not read her node: %d %v", code, v)
	}
	if code, v := api(t, s, "GET", "/api/v1/tree/", nil); code != 200 || !strings.Contains(fmt.Sprint(v["children"]), "hidden:true") {
		t.Errorf("the root's listing does not hide what anyone may not read: %v", v["children"])
	}
}

// browser is an HTTP client with a cookie jar, as a browser is.
func browser(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar}
}

// send sends a request with a JSON body and headers, and decodes the
// answer.
func send(t *testing.T, hc *http.Client, s *Server, method, path string, body any, header ...string) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, "http://"+s.HTTPAddr().String()+path, bytes.NewReader(b))
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&v)
	return resp.StatusCode, v
}

func TestALoginWritesOnlyWithItsCSRFToken(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", func(c *Config) { c.SuperDigest = wire.DigestID("admin", "pw") })
	hc := browser(t)
	code, v := send(t, hc, s, "POST", "/api/v1/login", map[string]any{"user": "admin", "password": "pw"})
	tok, _ := v["csrf_token"].(string)
	if code != 200 || tok == "" {
		t.Fatalf("login: %d %v", code, v)
	}
	if code, v := send(t, hc, s, "GET", "/api/v1/whoami", nil); code != 200 || v["user"] != "admin" || v["csrf_token"] != tok ||
		!strings.Contains(fmt.Sprint(v["identities"]), "super:admin") {
		t.Errorf("whoami after login: %d %v", code, v)
	}
	if code, v := send(t, hc, s, "POST", "/api/v1/tree/x", map[string]any{}); code != http.StatusForbidden ||
		!strings.Contains(fmt.Sprint(v["error"]), "CSRF") {
		t.Errorf("a write without its CSRF token: %d %v", code, v)
	}
	if code, _ := send(t, hc, s, "POST", "/api/v1/tree/x", map[string]any{}, "X-CSRF-Token", "wrong"); code != http.StatusForbidden {
		t.Errorf("a write with a wrong CSRF token: %d", code)
	}
	if code, _ := api(t, s, "GET", "/api/v1/tree/x", nil); code != http.StatusNotFound {
		t.Errorf("a refused write made the node: %d", code)
	}
	if code, v := send(t, hc, s, "POST", "/api/v1/tree/x", map[string]any{}, "X-CSRF-Token", tok); code != http.StatusCreated {
		t.Errorf("a write with its CSRF token: %d %v", code, v)
	}
	if code, v := send(t, hc, s, "POST", "/api/v1/tree/y", map[string]any{}, "X-CSRF-Token", tok, "Sec-Fetch-Site", "cross-site"); code != http.StatusForbidden {
		t.Errorf("a cross-site write: %d %v", code, v)
	}
	if code, _ := send(t, hc, s, "POST", "/api/v1/logout", nil, "X-CSRF-Token", tok); code != 200 {
		t.Errorf("logout: %d", code)
	}
	if code, v := send(t, hc, s, "GET", "/api/v1/whoami", nil); code != 200 || v["user"] != nil {
		t.Errorf("whoami after logout: %d %v", code, v)
	}
	if code, _ := send(t, hc, s, "POST", "/api/v1/login", map[string]any{"user": "", "password": "pw"}); code != http.StatusBadRequest {
		t.Errorf("a login without a user: %d", code)
	}
}

func TestTheWatchStreamFollowsANode(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	if code, v := api(t, s, "POST", "/api/v1/tree/n", map[string]any{"data": "a"}); code != 201 {
		t.Fatalf("create: %d %v", code, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+s.HTTPAddr().String()+"/api/v1/watch/n", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := bufio.NewScanner(resp.Body)
	next := func() map[string]any {
		t.Helper()
		for events.Scan() {
			if line, ok := strings.CutPrefix(events.Text(), "data: "); ok {
				var v map[string]any
				if err := json.Unmarshal([]byte(line), &v); err != nil {
					t.Fatal(err)
				}
				return v
			}
		}
		t.Fatalf("the stream ended: %v", events.Err())
		return nil
	}
	if v := next(); v["exists"] != true || v["version"] != 0.0 {
		t.Fatalf("first event %v", v)
	}
	api(t, s, "PUT", "/api/v1/tree/n", map[string]any{"data": "b", "version": 0})
	if v := next(); v["version"] != 1.0 {
		t.Errorf("after a set: %v", v)
	}
	api(t, s, "POST", "/api/v1/tree/n/child", map[string]any{})
	if v := next(); v["pzxid"] == nil {
		t.Errorf("after a child's create: %v", v)
	}
	// The stream sends the node's state as it is when it wakes: the
	// child's delete may show on its own, or with the node's.
	api(t, s, "DELETE", "/api/v1/tree/n?recursive=true", nil)
	for v := next(); v["exists"] != false; v = next() {
		if v["exists"] != true || v["version"] != 1.0 {
			t.Fatalf("between the child's delete and the node's: %v", v)
		}
	}
}

func TestTheSessionsViewListsAndClosesSessions(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", func(c *Config) { c.SuperDigest = wire.DigestID("admin", "pw") })
	c := dialRaw(t, s)
	resp := c.connect(wire.ConnectRequest{TimeoutMs: 10_000})
	if r := c.call(wire.Request{Op: wire.OpCreate, Path: "/e", Mode: wire.ModeEphemeral}); r.Err != wire.CodeOK {
		t.Fatalf("create: %v", r.Err)
	}
	id := leaseID(resp.SessionID)
	code, v := api(t, s, "GET", "/api/v1/sessions", nil)
	ss := fmt.Sprint(v["sessions"])
	if code != 200 || !strings.Contains(ss, id) || !strings.Contains(ss, "/e") || !strings.Contains(ss, "client_addr:127.0.0.1") {
		t.Fatalf("sessions: %d %v; want %s with /e and its address", code, v, id)
	}
	if code, _ := api(t, s, "DELETE", "/api/v1/sessions/"+id, nil); code != http.StatusForbidden {
		t.Errorf("anyone closed a session: %d", code)
	}
	if code, _ := api(t, s, "DELETE", "/api/v1/sessions/zz", nil, "admin", "pw"); code != http.StatusBadRequest {
		t.Errorf("a bad session id: %d", code)
	}
	if code, _ := api(t, s, "DELETE", "/api/v1/sessions/"+id, nil, "admin", "pw"); code != 200 {
		t.Errorf("the admin could not close a session: %d", code)
	}
	if code, _ := api(t, s, "GET", "/api/v1/tree/e", nil); code != http.StatusNotFound {
		t.Errorf("the closed session's ephemeral is still there: %d", code)
	}
	if code, _ := api(t, s, "DELETE", "/api/v1/sessions/"+id, nil, "admin", "pw"); code != http.StatusNotFound {
		t.Errorf("closing a closed session: %d", code)
	}
	if code, v := api(t, s, "GET", "/api/v1/overview", nil); code != 200 || v["znodes"] == nil || v["member"] != 1.0 {
		t.Errorf("overview: %d %v", code, v)
	}
}

// A request to the API or the console that names a host other than the
// member's (a page whose name an attacker pointed here: DNS rebinding) is
// refused, reads too; IP addresses, localhost and --http-hosts pass.
func TestTheAPIAnswersOnlyItsOwnHostNames(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", func(c *Config) { c.HTTPHosts = []string{"arbor.example"} })
	for _, tc := range []struct {
		host string
		want int
	}{
		{"attacker.example:2481", http.StatusForbidden},
		{"attacker.example", http.StatusForbidden},
		{"arbor.example:2481", http.StatusOK},
		{"localhost:2481", http.StatusOK},
		{"127.0.0.1:2481", http.StatusOK},
		{"[::1]:2481", http.StatusOK},
	} {
		req, _ := http.NewRequest("GET", "http://"+s.HTTPAddr().String()+"/api/v1/tree/", nil)
		req.Host = tc.host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Host %s: %d, want %d", tc.host, resp.StatusCode, tc.want)
		}
	}
}

// A login takes nobody else's place: one address's logins past its bound
// end its own oldest, never another address's.
func TestLoginsFromOneAddressEndOnlyItsOwn(t *testing.T) {
	t.Parallel()
	ls := newLogins()
	now := time.Unix(1000, 0)
	alice, _, err := ls.add("alice", "pw", "10.0.0.1", now)
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxLoginsPerIP + 10 {
		if _, _, err := ls.add(fmt.Sprint("mallory", i), "pw", "10.0.0.2", now.Add(time.Duration(i+1)*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := ls.get(alice, now.Add(time.Second)); !ok {
		t.Error("another address's logins ended alice's")
	}
	if n := len(ls.byToken); n != maxLoginsPerIP+1 {
		t.Errorf("%d logins kept, want %d of one address and alice's", n, maxLoginsPerIP)
	}
}

// A recursive delete through the tree API leaves ZooKeeper's system nodes
// in place, as client.DeleteAll does, and deletes what is below them:
// every quota, for /zookeeper/quota.
func TestARecursiveDeleteKeepsTheSystemNodes(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	c := dialClient(t, s)
	ctx := context.Background()
	for _, p := range []string{"/app", "/other"} {
		if _, err := c.Create(ctx, p, nil, client.Persistent); err != nil {
			t.Fatal(err)
		}
		if _, err := c.SetQuota(ctx, p, client.QuotaCountHard, 10); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Create(ctx, "/zookeeper/mine", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path    string
		deleted int
		gone    []string
	}{
		// /zookeeper/quota/app, its limits and stats; /other's the same.
		{"/zookeeper/quota", 6, []string{"/zookeeper/quota/app", "/zookeeper/quota/other"}},
		{"/zookeeper", 1, []string{"/zookeeper/mine"}},
	} {
		code, v := api(t, s, "DELETE", "/api/v1/tree"+tc.path+"?recursive=true", nil)
		if code != http.StatusOK || fmt.Sprint(v["deleted"]) != fmt.Sprint(tc.deleted) {
			t.Errorf("DELETE %s recursively: %d %v, want 200 and %d deleted", tc.path, code, v, tc.deleted)
		}
		for _, p := range tc.gone {
			if ok, _, _ := c.Exists(ctx, p); ok {
				t.Errorf("%s is still there", p)
			}
		}
	}
	for _, p := range []string{"/zookeeper", "/zookeeper/quota", "/zookeeper/config"} {
		if ok, _, err := c.Exists(ctx, p); !ok || err != nil {
			t.Errorf("%s: %v %v", p, ok, err)
		}
	}
	if _, err := c.Quota(ctx, "/app"); !errors.Is(err, client.ErrNoQuota) {
		t.Errorf("the quota on /app: %v", err)
	}
	if code, v := api(t, s, "DELETE", "/api/v1/tree/zookeeper/quota", nil); code != http.StatusBadRequest {
		t.Errorf("DELETE /zookeeper/quota alone: %d %v, want 400", code, v)
	}
}
