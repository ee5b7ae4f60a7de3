package recipes

import (
	"testing"
	"time"
)

func TestConfigValueTellsAMissingNodeFromAnEmptyValue(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.dial(t)
	ctx := ctxWait(t)
	cv := NewConfigValue(c, "/cfg/flag")
	defer cv.Close()
	values := cv.Watch()
	next := func() []byte {
		t.Helper()
		select {
		case v := <-values:
			return v
		case <-time.After(testWait):
			t.Fatal("no value")
			return nil
		}
	}
	if v := next(); v != nil {
		t.Fatalf("first value of a missing node %q, want nil", v)
	}
	must(t, SetConfig(ctx, c, "/cfg/flag", nil, -1))
	if v := next(); v == nil || len(v) != 0 {
		t.Fatalf("an empty value came as %#v, want an empty, non-nil slice", v)
	}
	must(t, cv.Set(ctx, []byte("on"), 0))
	if v := next(); string(v) != "on" {
		t.Fatalf("got %q, want on", v)
	}
	must(t, c.Delete(ctx, "/cfg/flag", -1))
	if v := next(); v != nil {
		t.Fatalf("a deleted node came as %#v, want nil", v)
	}
	if cv.Value() != nil {
		t.Errorf("Value after the delete: %q", cv.Value())
	}
	if err := cv.Set(ctx, []byte("x"), 3); err == nil {
		t.Error("a versioned Set of a missing node succeeded")
	}
}
