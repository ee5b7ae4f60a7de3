// Package console is Arbor's web console, served by every member at /ui/ on
// its HTTP listener: the tree (browse, create, edit, delete, followed
// live), the sessions, the members, the locks and an overview. Its pages
// are rendered on the server from the same views the JSON API under
// /api/v1/ answers (server.Node, Sessions, Members, Locks, Overview), with
// the caller's identities, so they show what the caller may read; its
// few scripts write through that API, with the login's CSRF token.
// Everything it serves is embedded in the binary: it needs no network
// beyond the member.
package console

import (
	"bytes"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/arbor-coord/arbor/server"
	"github.com/arbor-coord/arbor/wire"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// console serves the pages of one member.
type console struct {
	s     *server.Server
	pages map[string]*template.Template
}

// Handler returns the console of s, for server.Config.UI.
func Handler(s *server.Server) http.Handler {
	c := &console{s: s, pages: map[string]*template.Template{}}
	for _, page := range []string{"overview", "tree", "sessions", "members", "locks", "login", "notfound"} {
		c.pages[page] = template.Must(template.New("layout.html").Funcs(funcs).
			ParseFS(templateFS, "templates/layout.html", "templates/"+page+".html"))
	}
	static, _ := fs.Sub(staticFS, "static")
	mux := http.NewServeMux()
	mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /ui/{$}", c.overview)
	mux.HandleFunc("GET /ui/tree", c.tree)
	mux.HandleFunc("GET /ui/tree/{path...}", c.tree)
	mux.HandleFunc("GET /ui/sessions", c.sessions)
	mux.HandleFunc("GET /ui/members", c.members)
	mux.HandleFunc("GET /ui/locks", c.locks)
	mux.HandleFunc("GET /ui/login", c.login)
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		c.render(w, r, http.StatusNotFound, "notfound", "Not found", r.URL.Path)
	})
	return mux
}

// page is what every page's template gets: the layout's fields and the
// page's own Data.
type page struct {
	Title    string
	Nav      string // the page's entry in the navigation
	User     string // the logged-in user; "" for anyone
	CSRF     string
	Member   uint64
	Leader   uint64
	Fragment bool // only the page's main part, for the scripts' live updates
	Data     any
}

// render writes the page named name with data, or with ?fragment=1 only
// its main part.
func (c *console) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	st := c.s.Status()
	p := page{Title: title, Nav: name, Member: st.ID, Leader: st.Leader, Data: data,
		Fragment: r.URL.Query().Get("fragment") == "1"}
	p.User, p.CSRF, _ = c.s.Login(r)
	var b bytes.Buffer
	tmpl := "layout.html"
	if p.Fragment {
		tmpl = "main"
	}
	if err := c.pages[name].ExecuteTemplate(&b, tmpl, p); err != nil {
		http.Error(w, "rendering the page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	// The console runs its own scripts and styles only, and is never
	// framed by another site.
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// crumb is one step of a node's breadcrumbs.
type crumb struct{ Name, Path string }

// treePage is the tree page's data.
type treePage struct {
	Path       string
	Crumbs     []crumb
	Node       server.NodeView
	Shown      string // the data as shown: indented JSON, text or a hex dump
	Err        string // why the node cannot be shown
	Editable   bool   // the data survives the edit box (editable)
	Limit      int
	Prev, Next int // offsets of the pages of children around this one; -1: none
	Mode       string
}

func (c *console) tree(w http.ResponseWriter, r *http.Request) {
	path := "/" + r.PathValue("path")
	p := treePage{Path: path, Limit: server.DefaultChildPage, Prev: -1, Next: -1}
	for i := 1; i < len(path); i++ {
		if i == len(path)-1 || path[i+1] == '/' {
			p.Crumbs = append(p.Crumbs, crumb{Name: path[strings.LastIndexByte(path[:i+1], '/')+1 : i+1], Path: path[:i+1]})
		}
	}
	offset, _ := strconv.Atoi(r.URL.Query().Get("offset"))
	node, err := c.s.Node(c.s.HTTPIdentities(r), path, max(offset, 0), p.Limit)
	status := http.StatusOK
	switch {
	case errors.Is(err, wire.ErrNoNode):
		status, p.Err = http.StatusNotFound, "There is no node "+path+"."
	case errors.Is(err, wire.ErrNoAuth):
		status, p.Err = http.StatusForbidden, "You may not read "+path+": its ACL does not give READ to "+c.who(r)+"."
	case err != nil:
		status, p.Err = http.StatusBadRequest, err.Error()
	}
	if err == nil {
		p.Node, p.Shown, p.Editable = node, shown(node), editable(node.Data)
		if node.Offset > 0 {
			p.Prev = max(node.Offset-p.Limit, 0)
		}
		if node.Offset+len(node.Children) < node.Total {
			p.Next = node.Offset + len(node.Children)
		}
	}
	c.render(w, r, status, "tree", path, p)
}

// who names the caller for a refusal.
func (c *console) who(r *http.Request) string {
	if user, _, ok := c.s.Login(r); ok {
		return user
	}
	return "anyone who is not logged in"
}

// shown is a node's data as the page shows it.
func shown(n server.NodeView) string {
	switch n.Format {
	case "json":
		var b bytes.Buffer
		if json.Indent(&b, n.Data, "", "  ") == nil {
			return b.String()
		}
	case "binary":
		return hex.Dump(n.Data)
	}
	return string(n.Data)
}

func (c *console) overview(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "overview", "Overview", c.s.Overview())
}

func (c *console) sessions(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "sessions", "Sessions", c.s.Sessions(r.Context(), c.s.HTTPIdentities(r)))
}

func (c *console) members(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "members", "Members", c.s.Members())
}

// locksPage is the locks page's data.
type locksPage struct {
	Locks     []server.LockView
	Deadlocks [][]server.DeadlockEdge
	History   []server.LockEventView // newest first
}

// lockHistoryShown is how many of the latest lock events the page shows.
const lockHistoryShown = 50

func (c *console) locks(w http.ResponseWriter, r *http.Request) {
	ids := c.s.HTTPIdentities(r)
	p := locksPage{Locks: c.s.Locks(ids), Deadlocks: c.s.Deadlocks(ids)}
	h := c.s.LockHistory(ids, "/")
	for i := len(h) - 1; i >= 0 && len(p.History) < lockHistoryShown; i-- {
		p.History = append(p.History, h[i])
	}
	c.render(w, r, http.StatusOK, "locks", "Locks", p)
}

func (c *console) login(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "login", "Log in", nil)
}

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"ago":        ago,
	"when":       when,
	"since":      since,
	"child":      func(dir, name string) string { return strings.TrimSuffix(dir, "/") + "/" + name },
	"spark":      spark,
	"series":     series,
	"charts":     func() []chart { return overviewCharts },
	"last":       func(v []float64) float64 { return lastOf(v) },
	"duration":   func(ms int64) string { return (time.Duration(ms) * time.Millisecond).Round(time.Millisecond).String() },
	"add":        func(a, b int) int { return a + b },
	"nodeURL":    nodeURL,
	"consoleURL": consoleURL,
	"int64":      func(v int32) int64 { return int64(v) },
}

// nodeURL is the tree page of the node at path, each name escaped: a
// name with ?, # or % in it links to its own node.
func nodeURL(path string) string {
	names := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i, n := range names {
		names[i] = url.PathEscape(n)
	}
	return "/ui/tree/" + strings.Join(names, "/")
}

// consoleURL is the console of member m, "" when its HTTP address is not
// known.
func consoleURL(m server.MemberView) string {
	if addr := server.ReachableAddr(m.HTTPAddr, m.PeerAddr); addr != "" {
		return "http://" + addr + "/ui/members"
	}
	return ""
}

// editable reports whether data comes back from a text box as it went in:
// UTF-8 without carriage returns or control characters other than tab
// and newline (a browser normalizes line ends, and the HTML parser drops
// a first newline and rewrites NUL).
func editable(data []byte) bool {
	if !utf8.Valid(data) {
		return false
	}
	for _, r := range string(data) {
		if r < 0x20 && r != '\t' && r != '\n' || r == 0x7f {
			return false
		}
	}
	return true
}

// ago says how long ago an RFC 3339 time was, as "3m12s ago".
func ago(t string) string {
	at, err := time.Parse(time.RFC3339Nano, t)
	if err != nil {
		return ""
	}
	d := time.Since(at)
	switch {
	case d < 0:
		return "in " + (-d).Round(time.Second).String()
	case d < time.Second:
		return "just now"
	case d > 48*time.Hour:
		return fmt.Sprintf("%d days ago", int(d.Hours()/24))
	}
	return d.Round(time.Second).String() + " ago"
}

// when shows an RFC 3339 time for people: to the ms, in UTC.
func when(t string) string {
	at, err := time.Parse(time.RFC3339Nano, t)
	if err != nil {
		return t
	}
	return at.UTC().Format("2006-01-02 15:04:05.000 UTC")
}

// since is the time in ms an RFC 3339 time is in the past: how long a
// holder has held, for one.
func since(t string) string {
	at, err := time.Parse(time.RFC3339Nano, t)
	if err != nil {
		return ""
	}
	return time.Since(at).Round(time.Millisecond).String()
}

// chart is one of the overview's charts: a series and its title.
type chart struct{ Name, Title string }

var overviewCharts = []chart{
	{"writes", "Writes per second (the cluster's)"},
	{"reads", "Reads per second (this member's)"},
	{"znodes", "Nodes"},
	{"sessions", "Sessions"},
	{"watches", "Watches on this member"},
}

// series is one of the overview's series, by its name in the JSON.
func series(ps []server.RatePoint, name string) []float64 {
	out := make([]float64, len(ps))
	for i, p := range ps {
		switch name {
		case "writes":
			out[i] = p.Writes
		case "reads":
			out[i] = p.Reads
		case "znodes":
			out[i] = float64(p.Znodes)
		case "sessions":
			out[i] = float64(p.Sessions)
		case "watches":
			out[i] = float64(p.Watches)
		}
	}
	return out
}

func lastOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return math.Round(v[len(v)-1]*10) / 10
}

// spark draws a series as the points of an SVG polyline in a 240x48 box,
// from 0 at the bottom.
func spark(v []float64) string {
	const w, h = 240.0, 48.0
	top := 1.0
	for _, x := range v {
		top = max(top, x)
	}
	top *= 1.2 // the peak below the top edge
	var b strings.Builder
	for i, x := range v {
		px := w
		if len(v) > 1 {
			px = float64(i) * w / float64(len(v)-1)
		}
		fmt.Fprintf(&b, "%.1f,%.1f ", px, h-2-x/top*(h-4))
	}
	return strings.TrimSpace(b.String())
}
