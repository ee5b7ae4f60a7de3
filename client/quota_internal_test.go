package client

import (
	"context"
	"errors"
	"testing"

	"github.com/arbor-coord/arbor/quotas"
	"github.com/arbor-coord/arbor/wire"
)

// A quota deleted by another client between DeleteQuota's read of its
// limits and its write of them is no quota: ErrNoQuota, as when it was
// never there.
func TestDeleteQuotaOfALimitOfAQuotaDeletedMeanwhileIsErrNoQuota(t *testing.T) {
	s := newFakeServer(t)
	c := dialFake(t, []string{s.listen()})
	for _, p := range []string{"/zookeeper", wire.QuotaPath, quotas.QuotaPath("/app")} {
		mustCreate(t, c, p, nil, Persistent)
	}
	mustCreate(t, c, quotas.LimitPath("/app"), []byte("count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=5"), Persistent)
	s.mu.Lock()
	s.onRequest = func(req *wire.Request) {
		if req.Op == wire.OpSetData && req.Path == quotas.LimitPath("/app") {
			if _, _, code := s.writeLocked([]wire.Request{{Op: wire.OpDelete, Path: req.Path, Version: -1}}, 0); code != wire.CodeOK {
				s.t.Errorf("delete %s: %v", req.Path, code)
			}
		}
	}
	s.mu.Unlock()
	err := c.DeleteQuota(context.Background(), "/app", QuotaCountHard)
	if !errors.Is(err, ErrNoQuota) {
		t.Fatalf("DeleteQuota = %v, want ErrNoQuota", err)
	}
}
