package server

import (
	"reflect"
	"testing"

	"github.com/arbor-coord/arbor/tree"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// A client that keeps writing over a quota cannot flood the log: a line a
// second per kind of limit, every breach counted.
func TestQuotaBreachesAreCountedAllAndLoggedSparingly(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	reg := prometheus.NewRegistry()
	q := newQuotaAlarms(reg)
	soft := []tree.QuotaBreach{{Path: "/app", Limit: 2, Usage: 3}}
	hard := []tree.QuotaBreach{{Path: "/app", Bytes: true, Hard: true, Limit: 10, Usage: 11}}
	for range 100 {
		q.note(zap.New(core), soft, 0x1)
		q.note(zap.New(core), hard, 0x1)
	}
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 {
		t.Fatalf("gathered %d families, %v", len(mfs), err)
	}
	counts := map[string]float64{}
	for _, m := range mfs[0].GetMetric() {
		key := ""
		for _, l := range m.GetLabel() {
			key += l.GetName() + "=" + l.GetValue() + " "
		}
		counts[key] = m.GetCounter().GetValue()
	}
	want := map[string]float64{"kind=bytes limit=hard ": 100, "kind=bytes limit=soft ": 0, "kind=count limit=hard ": 0, "kind=count limit=soft ": 100}
	if !reflect.DeepEqual(counts, want) {
		t.Errorf("%s = %v, want %v", mfs[0].GetName(), counts, want)
	}
	if n := logs.Len(); n != 2 {
		t.Errorf("%d lines logged, want 2 (one per kind of limit within the second)", n)
	}
	for _, e := range logs.All() {
		if e.ContextMap()["path"] != "/app" || e.ContextMap()["session"] != "0x1" {
			t.Errorf("logged %v", e.ContextMap())
		}
	}
}
