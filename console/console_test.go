package console_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/console"
	"github.com/arbor-coord/arbor/server"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

func startMember(t *testing.T, ui bool) *server.Server {
	t.Helper()
	cfg := server.Config{Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", DataDir: t.TempDir(), TickInterval: 10 * time.Millisecond,
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))}
	if ui {
		cfg.UI = console.Handler
	}
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

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

// Every page renders, whole and as the fragment the scripts refresh, and
// what cannot be shown is said on the page with its status.
func TestEveryPageRenders(t *testing.T) {
	base := "http://" + startMember(t, true).HTTPAddr().String()
	for _, tc := range []struct {
		path, want string
		status     int
	}{
		{"/", "<h1>Overview</h1>", 200}, // redirected
		{"/ui/", "<h1>Overview</h1>", 200},
		{"/ui/tree/", `<h1 class="path">/</h1>`, 200},
		{"/ui/tree/zookeeper", `<h1 class="path">/zookeeper</h1>`, 200},
		{"/ui/tree/nope", "There is no node /nope", 404},
		{"/ui/tree/a/", "invalid", 400},
		{"/ui/sessions", "<h1>Sessions", 200},
		{"/ui/members", "<h1>Members", 200},
		{"/ui/locks", "<h1>Locks", 200},
		{"/ui/login", `id="login-form"`, 200},
		{"/ui/nope", "The console has no page /ui/nope", 404},
		{"/ui/static/console.js", "EventSource", 200},
	} {
		code, body := get(t, base+tc.path)
		if code != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s: %d, want %d with %q; got:\n%.400s", tc.path, code, tc.status, tc.want, body)
		}
		if strings.HasPrefix(tc.path, "/ui/static") || tc.path == "/" {
			continue
		}
		sep := "?"
		if strings.Contains(tc.path, "?") {
			sep = "&"
		}
		if _, frag := get(t, base+tc.path+sep+"fragment=1"); strings.Contains(frag, "<html") || !strings.Contains(frag, tc.want) {
			t.Errorf("the fragment of %s is not the page's main part alone:\n%.400s", tc.path, frag)
		}
	}
}

func TestTheConsoleCanBeOff(t *testing.T) {
	base := "http://" + startMember(t, false).HTTPAddr().String()
	if code, _ := get(t, base+"/ui/"); code != http.StatusNotFound {
		t.Errorf("/ui/ of a member without the console: %d", code)
	}
	if code, _ := get(t, base+"/api/v1/tree/"); code != http.StatusOK {
		t.Errorf("the API of a member without the console: %d", code)
	}
}

// A node with more children than a page shows its pager, and binary data
// its hex dump: the parts of the tree page only such nodes render.
func TestTheTreePageRendersPagesAndBinaryData(t *testing.T) {
	s := startMember(t, true)
	base := "http://" + s.HTTPAddr().String()
	post := func(path string, body string) {
		t.Helper()
		resp, err := http.Post(base+"/api/v1/tree"+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("create %s: %d", path, resp.StatusCode)
		}
	}
	post("/many", `{}`)
	for i := range server.DefaultChildPage + 20 {
		post(fmt.Sprintf("/many/c%03d", i), `{}`)
	}
	post("/many/bin", `{"data": "/wAB", "encoding": "base64"}`)
	code, body := get(t, base+"/ui/tree/many")
	if code != 200 || !strings.Contains(body, `href="?offset=100"`) || !strings.Contains(body, "1–100 of 121") {
		t.Errorf("the first page of 121 children: %d\n%.2000s", code, body)
	}
	code, body = get(t, base+"/ui/tree/many?offset=100")
	if code != 200 || !strings.Contains(body, `href="?offset=0"`) || !strings.Contains(body, "101–121 of 121") {
		t.Errorf("the second page: %d", code)
	}
	code, body = get(t, base+"/ui/tree/many/bin")
	if code != 200 || !strings.Contains(body, "ff 00 01") {
		t.Errorf("binary data: %d, want a hex dump", code)
	}
}
