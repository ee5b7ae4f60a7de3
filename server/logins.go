package server

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/arbor-coord/arbor/wire"
)

// Logins: a browser (the web console) logs in once with a digest user and
// password, as a ZooKeeper client's addAuth would, and gets a cookie that
// stands for that identity on the member's HTTP API. The password never
// leaves the member: the login keeps only the digest identity it makes.
// A request that a login cookie authenticates and that changes anything
// (any method but GET, HEAD and OPTIONS) must carry the login's CSRF token
// in the X-CSRF-Token header, so another site cannot make a logged-in
// browser write; the whole HTTP API also refuses unsafe requests that a
// browser says come from another origin (http.CrossOriginProtection).
// Logins live in one member's memory: a restart, or another member, needs
// a new one.

const (
	csrfHeader     = "X-CSRF-Token"
	loginIdle      = 8 * time.Hour // a login unused this long ends
	maxLogins      = 10_000        // past it, no new login until one ends
	maxLoginsPerIP = 64            // past it, the address's least recently used login ends
	maxLoginUser   = 256
)

// login is one browser's login.
type login struct {
	user, digest string // digest: the identity's id, user:base64(sha1(user:password))
	csrf         string
	ip           string // the address it came from
	used         time.Time
}

// errTooManyLogins refuses a login while the member holds maxLogins.
var errTooManyLogins = &apiError{http.StatusServiceUnavailable, "this member holds as many logins as it may: try again once some end"}

// logins are a member's logins by cookie value.
type logins struct {
	mu      sync.Mutex
	byToken map[string]*login
}

func newLogins() *logins { return &logins{byToken: map[string]*login{}} }

// randomHex is n random bytes in hex: a login's tokens, the unique part
// of a lock node's name.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// add logs user in with password from ip and returns the cookie's value.
// A login takes nobody else's place: an address that holds
// maxLoginsPerIP gives up its own least recently used one, and a member
// that holds maxLogins (after dropping those past loginIdle) takes no
// more.
func (ls *logins) add(user, password, ip string, now time.Time) (string, *login, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	var oldest string
	mine := 0
	for tok, l := range ls.byToken {
		switch {
		case now.Sub(l.used) > loginIdle:
			delete(ls.byToken, tok)
		case l.ip == ip:
			mine++
			if oldest == "" || l.used.Before(ls.byToken[oldest].used) {
				oldest = tok
			}
		}
	}
	if mine >= maxLoginsPerIP {
		delete(ls.byToken, oldest)
	}
	if len(ls.byToken) >= maxLogins {
		return "", nil, errTooManyLogins
	}
	tok := randomHex(24)
	l := &login{user: user, digest: wire.DigestID(user, password), csrf: randomHex(24), ip: ip, used: now}
	ls.byToken[tok] = l
	return tok, l, nil
}

// get returns the live login of a cookie's value (a copy), and marks it
// used.
func (ls *logins) get(tok string, now time.Time) (login, bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l, ok := ls.byToken[tok]
	if ok && now.Sub(l.used) > loginIdle {
		delete(ls.byToken, tok)
		ok = false
	}
	if !ok {
		return login{}, false
	}
	l.used = now
	return *l, true
}

func (ls *logins) remove(tok string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	delete(ls.byToken, tok)
}

// loginCookie is the name of the member's login cookie. A browser sends a
// host's cookies to all its ports: with the member's id in its name, the
// logins of two members on one host stay apart.
func (s *Server) loginCookie() string { return fmt.Sprintf("arbor_login_%d", s.cfg.ID) }

// Login is who a request's login cookie logs in, if anyone: the user and
// the CSRF token its writes must carry.
func (s *Server) Login(r *http.Request) (user, csrf string, ok bool) {
	c, err := r.Cookie(s.loginCookie())
	if err != nil {
		return "", "", false
	}
	l, ok := s.logins.get(c.Value, time.Now())
	return l.user, l.csrf, ok
}

// guardHTTP wraps the HTTP API: it refuses a request to the API or the
// console that names a host that is not this member's (a page of another
// site whose name points here: DNS rebinding), a cross-origin unsafe
// request from a browser, and an unsafe request of a login without its
// CSRF token.
func (s *Server) guardHTTP(h http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, nil, &apiError{http.StatusForbidden, "refused: a cross-origin request that would change something"})
	}))
	return cop.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (strings.HasPrefix(r.URL.Path, "/api/") || strings.HasPrefix(r.URL.Path, "/ui/") || strings.HasPrefix(r.URL.Path, "/commands")) &&
			!s.knownHost(r.Host) {
			writeJSON(w, nil, &apiError{http.StatusForbidden, fmt.Sprintf(
				"refused: the host %q is not this member's (an IP address, localhost, or a name in --http-hosts)", r.Host)})
			return
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			if c, err := r.Cookie(s.loginCookie()); err == nil && r.URL.Path != "/api/v1/login" && r.URL.Path != "/api/v1/logout" {
				l, ok := s.logins.get(c.Value, time.Now())
				if !ok {
					writeJSON(w, nil, &apiError{http.StatusUnauthorized, "your login has ended: log in again"})
					return
				}
				if subtle.ConstantTimeCompare([]byte(r.Header.Get(csrfHeader)), []byte(l.csrf)) != 1 {
					writeJSON(w, nil, &apiError{http.StatusForbidden, "refused: the request lacks its CSRF token (" + csrfHeader + " header); reload the page"})
					return
				}
			}
		}
		h.ServeHTTP(w, r)
	}))
}

// knownHost reports whether host, a request's Host header, names this
// member: an IP address, localhost, or a name in Config.HTTPHosts.
func (s *Server) knownHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	return net.ParseIP(host) != nil || strings.EqualFold(host, "localhost") ||
		slices.ContainsFunc(s.cfg.HTTPHosts, func(h string) bool { return strings.EqualFold(h, host) })
}

// handleLoginAPI adds login, logout and whoami to mux.
func (s *Server) handleLoginAPI(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v1/login", s.apiLogin)
	mux.HandleFunc("/api/v1/login", methodNotAllowed("POST"))
	mux.HandleFunc("POST /api/v1/logout", s.apiLogout)
	mux.HandleFunc("/api/v1/logout", methodNotAllowed("POST"))
	mux.HandleFunc("GET /api/v1/whoami", s.apiWhoAmI)
	mux.HandleFunc("/api/v1/whoami", methodNotAllowed("GET"))
}

// apiLogin answers POST /api/v1/login {"user", "password"}: it sets the
// login cookie and answers the user and the CSRF token.
func (s *Server) apiLogin(w http.ResponseWriter, r *http.Request) {
	var req struct {
		User     string `json:"user"`
		Password string `json:"password"`
	}
	if err := decodeBody(w, r, &req); err != nil {
		writeJSON(w, nil, err)
		return
	}
	if req.User == "" || len(req.User) > maxLoginUser || req.Password == "" {
		writeJSON(w, nil, badRequest("user (at most %d bytes) and password are required", maxLoginUser))
		return
	}
	if c, err := r.Cookie(s.loginCookie()); err == nil {
		s.logins.remove(c.Value)
	}
	tok, l, err := s.logins.add(req.User, req.Password, remoteHost(r), time.Now())
	if err != nil {
		writeJSON(w, nil, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: s.loginCookie(), Value: tok, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	writeJSON(w, map[string]string{"user": l.user, "csrf_token": l.csrf}, nil)
}

func (s *Server) apiLogout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(s.loginCookie()); err == nil {
		s.logins.remove(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: s.loginCookie(), Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	writeJSON(w, map[string]bool{"logged_out": true}, nil)
}

// apiWhoAmI answers the identities the request proves, and with a login
// its user and CSRF token.
func (s *Server) apiWhoAmI(w http.ResponseWriter, r *http.Request) {
	v := struct {
		User       string   `json:"user,omitempty"`
		CSRFToken  string   `json:"csrf_token,omitempty"`
		Identities []string `json:"identities"`
	}{Identities: identityNames(whoAmI(s.HTTPIdentities(r)))}
	v.User, v.CSRFToken, _ = s.Login(r)
	writeJSON(w, v, nil)
}
