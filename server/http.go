package server

import (
	"net/http"
	"time"
)

// newHTTPServer returns the server of the HTTP listener, serving h.
// ReadHeaderTimeout closes a connection whose client is slow to send its
// request's headers (or sends none), IdleTimeout one that waits longer than
// cfg.HTTPIdleTimeout for its next request; neither cuts a request in
// progress. WriteTimeout stays unset: it bounds a response from the start
// of its request, and would cut a long poll or an event stream. ReadTimeout
// stays unset too: how long a body may take to arrive is for the handlers
// that read one to decide.
func newHTTPServer(cfg *Config, h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: cfg.HTTPIdleTimeout}
}
