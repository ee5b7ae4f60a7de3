package console_test

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/console"
	"github.com/arbor-coord/arbor/internal/shardtest"
	"github.com/arbor-coord/arbor/raftnode"
	"github.com/arbor-coord/arbor/recipes"
	"github.com/arbor-coord/arbor/server"
	"github.com/arbor-coord/arbor/wire"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// The console's tests drive headless Chromium against a real 3-member
// cluster. Chromium is needed: .ci/run installs Debian's chromium, and
// without it these tests fail (they never skip on their own). Where no
// browser can be had, ARBOR_SKIP_BROWSER=1 skips them, said out loud.

// patience bounds every wait for the page or the cluster: far more than a
// loaded machine needs, as a wait ends as soon as its condition holds.
const patience = 30 * time.Second

// chromium finds the browser: $ARBOR_CHROMIUM, or one on the PATH.
func chromium(t *testing.T) string {
	t.Helper()
	if os.Getenv("ARBOR_SKIP_BROWSER") == "1" {
		t.Skip("ARBOR_SKIP_BROWSER=1: the console's browser tests are skipped")
	}
	if p := os.Getenv("ARBOR_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("the console's browser tests need headless Chromium: apt-get install chromium (.ci/run does), " +
		"or set ARBOR_CHROMIUM to a Chrome or Chromium binary; ARBOR_SKIP_BROWSER=1 skips them")
	return ""
}

// newBrowser starts headless Chromium and returns a tab's context.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	// The profile is removed after the browser is gone, not by t.TempDir,
	// whose removal may race with the browser's last writes.
	profile, err := os.MkdirTemp("", "arbor-console-test-")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // tests may run as root
		chromedp.DisableGPU,
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 900),
		// No network but the members': no background fetches, no lookups.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(alloc, chromedp.WithErrorf(func(format string, args ...any) {
		// This chromedp predates some of Chromium's events, and says so
		// for each; what else goes wrong surfaces as an action's error.
		if !strings.HasPrefix(format, "unhandled") {
			log.Printf("chromedp: "+format, args...)
		}
	}))
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
		_ = os.RemoveAll(profile)
	})
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	// Confirm every confirm() the console asks, as a user clicking OK.
	chromedp.ListenTarget(ctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			go func() { _ = chromedp.Run(ctx, page.HandleJavaScriptDialog(true)) }()
		}
	})
	return ctx
}

// adminUser and adminPassword are the cluster's superuser.
const adminUser, adminPassword = "admin", "secret"

// startCluster starts 3 members on loopback, their raft traffic on an
// in-memory network, each serving the console, and waits for a leader
// that all of them know.
func startCluster(t *testing.T) ([]*server.Server, *raftnode.MemNetwork) {
	t.Helper()
	peers := map[uint64]string{}
	for id := uint64(1); id <= 3; id++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		peers[id] = ln.Addr().String() // a name only: the network is in memory
		ln.Close()
	}
	nw := raftnode.NewMemNetwork()
	var members []*server.Server
	for id := uint64(1); id <= 3; id++ {
		s, err := server.New(server.Config{
			ID: id, Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", DataDir: t.TempDir(), Peers: peers, PeerNetwork: nw,
			MinSessionTimeout: 200 * time.Millisecond, TickInterval: 20 * time.Millisecond, RequestTimeout: 3 * time.Second,
			SuperDigest: wire.DigestID(adminUser, adminPassword), UI: console.Handler,
			Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named(fmt.Sprintf("n%d", id)),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		members = append(members, s)
	}
	waitFor(t, "a leader all members know", func() bool {
		l := members[0].Status().Leader
		for _, s := range members {
			if st := s.Status(); l == 0 || st.Leader != l {
				return false
			}
		}
		return true
	})
	shardLocks(t, members)
	return members, nw
}

// flagShards runs the browser tests against a cluster whose /locks
// children are spread over this many shards by hash (docs/scale-out.md):
// go test ./console -console.shards=4.
var flagShards = flag.Int("console.shards", 0, "spread the children of /locks over this many shards by hash")

// shardLocks spreads /locks' children over *flagShards shards, if asked.
func shardLocks(t *testing.T, members []*server.Server) {
	t.Helper()
	if *flagShards < 2 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	c, err := client.Dial(ctx, []string{members[0].Addr().String()},
		client.WithAuth("digest", client.DigestCredential(adminUser, adminPassword)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	shardtest.Spread(t, c, members, "/locks", *flagShards, patience)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(patience); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// dial connects a client to member s.
func dial(t *testing.T, s *server.Server) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	c, err := client.Dial(ctx, []string{s.Addr().String()}, client.WithSessionTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// until is an action that waits until the JavaScript expression cond is
// true on the page. It asks again when the page is between two documents
// (a click that navigates), where chromedp.Poll would fail.
func until(cond string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		for deadline := time.Now().Add(patience); time.Now().Before(deadline); {
			var ok bool
			if err = chromedp.Evaluate(cond, &ok).Do(ctx); err == nil && ok {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
		return fmt.Errorf("waited %v for %s (last error: %v)", patience, cond, err)
	})
}

// text is a JavaScript expression of the text of the element sel, "" if
// there is none.
func text(sel string) string {
	return fmt.Sprintf(`(document.querySelector(%q)?.textContent ?? "")`, sel)
}

func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action) {
	t.Helper()
	if err := chromedp.Run(ctx, actions...); err != nil {
		var body string
		_ = chromedp.Run(ctx, chromedp.Evaluate(`document.body ? document.body.innerText : ""`, &body))
		t.Fatalf("%s: %v\nthe page reads:\n%s", what, err, body)
	}
}

func TestTheConsoleInABrowser(t *testing.T) {
	ctx := newBrowser(t)
	members, nw := startCluster(t)
	bg := context.Background()
	// The browser uses member 1; the clients member 2, so that what the
	// page shows of them crossed the cluster.
	ui := "http://" + members[0].HTTPAddr().String()
	c := dial(t, members[1])
	for _, n := range []struct{ path, data string }{
		{"/app", `{"name":"orders","replicas":3}`}, {"/app/config", "v0"}, {"/app/services", ""},
		{"/app/services/a", "1"}, {"/app/services/b", "2"},
	} {
		if _, err := c.Create(bg, n.path, []byte(n.data), client.Persistent); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Create(bg, "/app/worker-1", nil, client.Ephemeral); err != nil {
		t.Fatal(err)
	}
	getData := func(path string) string {
		t.Helper()
		data, _, err := c.Get(bg, path)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}

	run(t, ctx, "log in",
		chromedp.Navigate(ui+"/ui/login"),
		chromedp.WaitVisible("#login-user", chromedp.ByQuery),
		chromedp.SendKeys("#login-user", adminUser, chromedp.ByQuery),
		chromedp.SendKeys("#login-password", adminPassword, chromedp.ByQuery),
		chromedp.Click(`#login-form button[type="submit"]`, chromedp.ByQuery),
		until(text("#user")+` === "admin"`),
	)

	t.Run("browse down to a node and edit it", func(t *testing.T) {
		run(t, ctx, "open the tree and click down to /app/config",
			chromedp.Navigate(ui+"/ui/tree/"),
			chromedp.Click(`#children a[href="/ui/tree/app"]`, chromedp.ByQuery),
			until(text("h1.path")+` === "/app"`),
			until(text("#data")+`.includes('"replicas": 3')`), // pretty JSON
			chromedp.Click(`#children a[href="/ui/tree/app/config"]`, chromedp.ByQuery),
			until(text("#data")+` === "v0"`),
		)
		run(t, ctx, "edit its data",
			chromedp.Click("#edit", chromedp.ByQuery),
			chromedp.SetValue("#edit-data", "v1", chromedp.ByQuery),
			chromedp.Click(`#edit-form button[type="submit"]`, chromedp.ByQuery),
			until(text("#data")+` === "v1"`),
		)
		if got := getData("/app/config"); got != "v1" {
			t.Errorf("after the edit, a client reads %q", got)
		}
	})

	t.Run("create a child", func(t *testing.T) {
		run(t, ctx, "create /app/made-here",
			chromedp.Navigate(ui+"/ui/tree/app"),
			chromedp.Click("details.create summary", chromedp.ByQuery),
			chromedp.SendKeys("#create-name", "made-here", chromedp.ByQuery),
			chromedp.SendKeys("#create-data", "hi", chromedp.ByQuery),
			chromedp.Click(`#create-form button[type="submit"]`, chromedp.ByQuery),
			until(text("#children")+`.includes("made-here")`),
		)
		if got := getData("/app/made-here"); got != "hi" {
			t.Errorf("a client reads %q from the node made in the browser", got)
		}
		run(t, ctx, "back to /app/config", chromedp.Navigate(ui+"/ui/tree/app/config"), until(text("#data")+` === "v1"`))
	})

	t.Run("another client's change appears without a reload", func(t *testing.T) {
		var marker bool
		run(t, ctx, "mark the page", chromedp.Evaluate(`window.notReloaded = true`, &marker))
		if _, err := c.Set(bg, "/app/config", []byte("from a client"), -1); err != nil {
			t.Fatal(err)
		}
		run(t, ctx, "see the change", until(text("#data")+` === "from a client"`), until(`window.notReloaded === true`))
	})

	t.Run("a change made before the page follows its node shows too", func(t *testing.T) {
		// The page's watch is held back until after the change, as a slow
		// one would be: the watch's first event then already shows the
		// change, and the page must not take it for what it rendered.
		watch := func(block bool) []*network.BlockPattern {
			return []*network.BlockPattern{{URLPattern: "*://*:*/api/v1/watch/*", Block: block}}
		}
		run(t, ctx, "open the page with its watch held back",
			network.Enable(),
			network.SetBlockedURLs().WithURLPatterns(watch(true)),
			chromedp.Navigate(ui+"/ui/tree/app/config"),
			until(text("#data")+` === "from a client"`),
		)
		if _, err := c.Set(bg, "/app/config", []byte("before the watch"), -1); err != nil {
			t.Fatal(err)
		}
		run(t, ctx, "let the watch through and see the change",
			network.SetBlockedURLs().WithURLPatterns(watch(false)),
			until(text("#data")+` === "before the watch"`),
		)
	})

	t.Run("a stale edit is refused with a message", func(t *testing.T) {
		run(t, ctx, "begin an edit", chromedp.Click("#edit", chromedp.ByQuery), chromedp.SetValue("#edit-data", "stale", chromedp.ByQuery))
		if _, err := c.Set(bg, "/app/config", []byte("newer"), -1); err != nil {
			t.Fatal(err)
		}
		run(t, ctx, "save it",
			until(text("#notice")+`.includes("changed while you edit it")`),
			chromedp.Click(`#edit-form button[type="submit"]`, chromedp.ByQuery),
			until(text("#notice")+`.includes("conflict")`),
		)
		if got := getData("/app/config"); got != "newer" {
			t.Errorf("after the stale edit, a client reads %q", got)
		}
		run(t, ctx, "cancel it", chromedp.Click(`[data-action="cancel-edit"]`, chromedp.ByQuery), until(text("#data")+` === "newer"`))
	})

	t.Run("delete with confirmation", func(t *testing.T) {
		run(t, ctx, "ask to delete /app/services",
			chromedp.Navigate(ui+"/ui/tree/app/services"),
			chromedp.Click("#delete", chromedp.ByQuery),
			until(`document.getElementById("delete-dialog").open`),
			// Unconfirmed, the delete of a node with children goes nowhere.
			chromedp.Click("#delete-confirm", chromedp.ByQuery),
			until(`document.getElementById("delete-dialog").open`),
		)
		if ok, _, _ := c.Exists(bg, "/app/services"); !ok {
			t.Fatal("/app/services was deleted without the confirmation")
		}
		run(t, ctx, "confirm it",
			chromedp.Click("#delete-recursive", chromedp.ByQuery),
			chromedp.Click("#delete-confirm", chromedp.ByQuery),
			until(`location.pathname === "/ui/tree/app"`),
			until(text("#notice")+` === "Deleted /app/services."`),
		)
		if ok, _, _ := c.Exists(bg, "/app/services"); ok {
			t.Error("/app/services is still there")
		}
	})

	t.Run("a session shows its ephemerals", func(t *testing.T) {
		id := fmt.Sprintf("%016x", uint64(c.SessionID()))
		row := fmt.Sprintf("#s-%s", id)
		run(t, ctx, "open the sessions",
			chromedp.Navigate(ui+"/ui/sessions"),
			until(text(row)+`.includes("/app/worker-1")`),
			until(text(row)+`.includes("127.0.0.1:")`), // its address, from member 2
		)
	})

	t.Run("the members, with one leader", func(t *testing.T) {
		run(t, ctx, "open the members",
			chromedp.Navigate(ui+"/ui/members"),
			until(`document.querySelectorAll("#members tbody tr").length === 3`),
			until(`document.querySelectorAll('#members tr[data-role="leader"]').length === 1`),
			until(`[...document.querySelectorAll("#members tbody tr")].every(r => r.textContent.includes("healthy") && !r.textContent.includes("unhealthy"))`),
			until(`document.getElementById("no-quorum") === null`),
		)
	})

	t.Run("a lock's holder and waiter, broken by an admin", func(t *testing.T) {
		alice, bob := dial(t, members[1]), dial(t, members[2])
		held := recipes.NewMutex(alice, "/locks/orders", recipes.WithOwner("alice"), recipes.WithLease(time.Minute))
		if err := held.Lock(bg); err != nil {
			t.Fatal(err)
		}
		waiter := recipes.NewMutex(bob, "/locks/orders", recipes.WithOwner("bob"))
		got := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(bg, 2*patience)
			defer cancel()
			got <- waiter.Lock(ctx)
		}()
		row := `#locks tr[data-lock="/locks/orders"]`
		run(t, ctx, "see the holder and the waiter",
			chromedp.Navigate(ui+"/ui/locks"),
			until(text(row)+`.includes("alice")`),
			until(text(row)+`.includes("1 waiting") && `+text(row)+`.includes("bob")`),
		)
		run(t, ctx, "break the lock",
			chromedp.SendKeys(row+` input[name="reason"]`, "stuck in a test", chromedp.ByQuery),
			chromedp.Click(row+` button[type="submit"]`, chromedp.ByQuery),
			until(text("#notice")+`.includes("Broke /locks/orders")`),
		)
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("the waiter did not get the broken lock: %v", err)
			}
		case <-time.After(patience):
			t.Fatal("the waiter did not get the broken lock")
		}
		select {
		case <-held.Lost():
		case <-time.After(patience):
			t.Error("the holder was not told it lost the lock")
		}
		run(t, ctx, "see the break in the history",
			until(text("#history")+`.includes("broken") && `+text("#history")+`.includes("stuck in a test")`))
	})

	t.Run("a member cut off from the others shows that there is no quorum", func(t *testing.T) {
		nw.Partition([]uint64{1}, []uint64{2, 3})
		run(t, ctx, "see the banner on member 1",
			chromedp.Navigate(ui+"/ui/members"),
			until(text("#no-quorum")+`.includes("No quorum")`)) // the page refreshes itself
		nw.Heal()
		run(t, ctx, "see it go after the heal", until(`document.getElementById("no-quorum") === null`))
	})

	if p := os.Getenv("ARBOR_CONSOLE_SCREENSHOT"); p != "" {
		var png []byte
		run(t, ctx, "take the README's screenshot",
			chromedp.Navigate(ui+"/ui/tree/app"),
			until(text("h1.path")+` === "/app"`),
			chromedp.CaptureScreenshot(&png))
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTheConsoleWithoutALoginOnlyReads(t *testing.T) {
	ctx := newBrowser(t)
	members, _ := startCluster(t)
	ui := "http://" + members[0].HTTPAddr().String()
	var edits, creates int
	var body string
	run(t, ctx, "open the tree as anyone",
		chromedp.Navigate(ui+"/ui/tree/"),
		until(text("h1.path")+` === "/"`),
		chromedp.Evaluate(`document.querySelectorAll("#edit, #delete").length`, &edits),
		chromedp.Evaluate(`document.querySelectorAll("#create-form").length`, &creates),
		chromedp.Navigate(ui+"/ui/tree/no/such/node"),
		chromedp.Text("#node-error", &body, chromedp.ByQuery),
	)
	if edits+creates != 0 {
		t.Errorf("a page for anyone offers %d edit and %d create controls", edits, creates)
	}
	if !strings.Contains(body, "There is no node /no/such/node") {
		t.Errorf("a missing node reads %q", body)
	}

	// The page of a missing node stays as it is until the node comes, and
	// then shows it.
	run(t, ctx, "open a node not made yet", chromedp.Navigate(ui+"/ui/tree/late"), until(text("#node-error")+`.includes("There is no node /late")`))
	if _, err := dial(t, members[1]).Create(context.Background(), "/late", []byte("here now"), client.Persistent); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "see it come", until(text("#data")+` === "here now"`))
}
