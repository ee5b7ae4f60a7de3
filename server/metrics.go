package server

import (
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the server's prometheus metrics, in a registry of its own so
// that several servers can run in one process (as in tests).
type metrics struct {
	reg           *prometheus.Registry
	requests      *prometheus.CounterVec
	latency       *prometheus.HistogramVec
	connections   prometheus.Gauge
	notifications prometheus.Counter
	authFailures  prometheus.Counter
	noAuth        prometheus.Counter
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "arbor_requests_total", Help: "Client requests answered, by op and result.",
		}, []string{"op", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "arbor_request_duration_seconds", Help: "Time from reading a request to queueing its reply.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16),
		}, []string{"op"}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "arbor_connections", Help: "Open client connections.",
		}),
		notifications: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "arbor_watch_notifications_total", Help: "Watch notifications sent.",
		}),
		authFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "arbor_auth_failures_total", Help: "Auth requests refused (unknown scheme, malformed credential).",
		}),
		noAuth: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "arbor_no_auth_total", Help: "Requests refused with NoAuth: an ACL did not grant the permission.",
		}),
	}
	treeGauge := func(name, help string, f func(t *tree.Tree) int) prometheus.GaugeFunc {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			var v int
			s.fsm.read(func(t *tree.Tree) { v = f(t) })
			return float64(v)
		})
	}
	m.reg.MustRegister(
		m.requests, m.latency, m.connections, m.notifications, m.authFailures, m.noAuth,
		treeGauge("arbor_sessions", "Live sessions.", (*tree.Tree).SessionCount),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "arbor_znodes", Help: "Znodes in the tree, the root included (over every shard)."},
			func() float64 { return float64(s.counts().znodes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "arbor_watches", Help: "Watches registered on this server."},
			func() float64 { return float64(s.watches.size()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "arbor_raft_applied_index", Help: "Last raft entry applied."},
			func() float64 { return float64(s.node.Applied()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "arbor_raft_term", Help: "Current raft term."},
			func() float64 { return float64(s.node.Term()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "arbor_is_leader", Help: "1 on the raft leader, else 0."},
			func() float64 {
				if s.node.IsLeader() {
					return 1
				}
				return 0
			}),
		digestCollector{s},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// observe counts a request of op (the name the codec gives it) answered
// with code after d.
func (m *metrics) observe(op string, code wire.Code, d time.Duration) {
	result := "ok"
	if code != wire.CodeOK {
		result = code.Name()
	}
	m.requests.WithLabelValues(op, result).Inc()
	m.latency.WithLabelValues(op).Observe(d.Seconds())
}

// handler serves /metrics, /status (the member's Status as JSON) and
// /healthz: healthy while raft runs and knows a leader. Each pattern names
// its methods (GET takes HEAD too), so the mux answers any other method
// with 405 and an Allow header.
func (m *metrics) handler(s *Server) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /status", s.serveStatus)
	s.handleLockAPI(mux)
	s.handleTreeAPI(mux)
	s.handleLoginAPI(mux)
	s.handleClusterAPI(mux)
	s.handleMembersAPI(mux)
	s.handleShardsAPI(mux)
	s.handleZKCommands(mux)
	if s.cfg.UI != nil {
		mux.Handle("/ui/", s.cfg.UI(s))
		mux.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusFound))
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-s.node.Done():
			http.Error(w, "raft stopped", http.StatusServiceUnavailable)
			return
		default:
		}
		if s.node.Leader() == 0 {
			http.Error(w, "no leader", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	if s.cfg.Pprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol) // go tool pprof posts the addresses it looks up
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return s.guardHTTP(mux)
}

// digestCollector reports the tree's digest as the label of an info metric
// (a 64-bit digest does not fit a float64 value), with the zxid it is at:
// two members with the same zxid must show the same digest.
type digestCollector struct{ s *Server }

var digestDesc = prometheus.NewDesc("arbor_tree_digest_info",
	"The tree's digest (label digest) at zxid (label zxid); always 1.", []string{"digest", "zxid"}, nil)

func (d digestCollector) Describe(ch chan<- *prometheus.Desc) { ch <- digestDesc }

func (d digestCollector) Collect(ch chan<- prometheus.Metric) {
	st := d.s.Status()
	ch <- prometheus.MustNewConstMetric(digestDesc, prometheus.GaugeValue, 1, st.Digest, strconv.FormatInt(st.Zxid, 10))
}
