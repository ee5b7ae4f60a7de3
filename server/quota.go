package server

import (
	"fmt"
	"time"

	"github.com/arbor-coord/arbor/tree"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// quotaAlarms counts and logs the quota limits that the writes this
// member proposed went over (tree.Result.Quota): once per write in the
// cluster, on the member its client asked, as ZooKeeper's leader logs
// them. The log is rate-limited, a line a second per kind of limit, so
// that a client cannot flood it; the counter counts every one.
type quotaAlarms struct {
	exceeded *prometheus.CounterVec // by kind (count, bytes) and limit (soft, hard, exempt)

	logThrottle
}

func newQuotaAlarms(reg prometheus.Registerer) *quotaAlarms {
	q := &quotaAlarms{
		exceeded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "arbor_quota_exceeded_total",
			Help: "Writes that went over a quota's soft limit (and went through), would have gone over its hard limit (and were refused), or went over its hard limit as a member's lock-delay (exempt, and went through), by kind and limit.",
		}, []string{"kind", "limit"}),
	}
	for _, kind := range []string{"count", "bytes"} {
		for _, limit := range []string{"soft", "hard", "exempt"} {
			q.exceeded.WithLabelValues(kind, limit) // shown at 0 from the start
		}
	}
	reg.MustRegister(q.exceeded)
	return q
}

// note counts and logs the breaches of a write of session (0: the
// member's own, or an HTTP client's).
func (q *quotaAlarms) note(log *zap.Logger, breaches []tree.QuotaBreach, session int64) {
	for _, b := range breaches {
		limit, msg := "soft", "quota exceeded: a write went over a soft limit"
		switch {
		case b.Exempt:
			limit, msg = "exempt", "quota exceeded: a lock-delay went over a hard limit, which lets it through"
		case b.Hard:
			limit, msg = "hard", "quota exceeded: a write was refused at a hard limit"
		}
		q.exceeded.WithLabelValues(b.Kind(), limit).Inc()
		suppressed, ok := q.mayLog(b.Kind()+"/"+limit, time.Now())
		if !ok {
			continue
		}
		log.Warn(msg, zap.String("path", b.Path), zap.String("kind", b.Kind()), zap.String("limit", limit),
			zap.Int64("limit_value", b.Limit), zap.Int64("usage", b.Usage),
			zap.String("session", fmt.Sprintf("%#x", session)), zap.Int("not_logged", suppressed))
	}
}
