package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/wire"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestMetricsAndHealth(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	base := "http://" + s.HTTPAddr().String()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if code, body := get(t, base+"/healthz"); code == http.StatusOK && body == "ok\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("/healthz never became ok")
		}
	}
	c := dialRaw(t, s)
	c.connect(wire.ConnectRequest{})
	c.call(wire.Request{Xid: 1, Op: wire.OpCreate, Path: "/m"})
	c.call(wire.Request{Xid: 2, Op: wire.OpCreate, Path: "/m"}) // NodeExists
	c.call(wire.Request{Xid: 3, Op: wire.OpGetData, Path: "/m", Watch: true})
	c.call(wire.Request{Xid: 4, Op: wire.OpGetEphemerals, Path: "/"})
	c.call(wire.Request{Xid: 5, Op: wire.OpGetAllChildrenNumber, Path: "/missing"})
	for op := byte(70); op < 80; op++ { // unknown ops share one label
		frame := wire.AppendRequest(nil, &wire.Request{Xid: 6, Op: wire.OpPing})
		frame[len(frame)-1] = op
		c.write(frame)
		c.reply(wire.OpPing)
	}
	writer := dialRaw(t, s)
	writer.connect(wire.ConnectRequest{})
	writer.call(wire.Request{Xid: 1, Op: wire.OpSetData, Path: "/m", Version: -1})
	if r, _ := c.reply(wire.OpGetData); r.Xid != wire.XidNotification {
		t.Fatalf("want the watch notification, got %+v", r)
	}

	_, body := get(t, base+"/metrics")
	for _, want := range []string{
		`arbor_requests_total{op="create",result="ok"} 1`,
		`arbor_requests_total{op="create",result="node_exists"} 1`,
		`arbor_requests_total{op="getData",result="ok"} 1`,
		`arbor_requests_total{op="getEphemerals",result="ok"} 1`,
		`arbor_requests_total{op="getAllChildrenNumber",result="no_node"} 1`,
		`arbor_requests_total{op="unknown",result="unimplemented"} 10`,
		`arbor_request_duration_seconds_count{op="setData"} 1`,
		"arbor_connections 2",
		"arbor_sessions 2",
		"arbor_znodes 5",
		"arbor_watches 0",
		"arbor_watch_notifications_total 1",
		"arbor_is_leader 1",
		"arbor_tree_digest_info{digest=",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if _, body := get(t, base+"/status"); !strings.Contains(body, `"znodes":5`) || !strings.Contains(body, `"leader":1`) {
		t.Errorf("/status = %s", body)
	}
}

func TestProfilesAreServedOnlyWithPprof(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{false, true} {
		s := startServer(t, "", func(cfg *Config) { cfg.Pprof = on })
		base := "http://" + s.HTTPAddr().String()
		code, body := get(t, base+"/debug/pprof/goroutine?debug=1")
		if got := code == http.StatusOK && strings.Contains(body, "goroutine profile"); got != on {
			t.Errorf("Pprof %v: /debug/pprof/goroutine answered %d %.60q", on, code, body)
		}
	}
}
