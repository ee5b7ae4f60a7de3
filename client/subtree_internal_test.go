package client

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/arbor-coord/arbor/wire"
)

// addChildAtDelete makes the fake server create a new child of parent
// just before each of the first n deletes of parent, as another client
// could, and returns a function that counts those deletes.
func addChildAtDelete(s *fakeServer, parent string, n int) (deletes func() int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	count := 0
	s.onRequest = func(req *wire.Request) {
		if req.Op != wire.OpDelete || req.Path != parent {
			return
		}
		count++
		if count <= n {
			child := wire.Request{Op: wire.OpCreate, Path: fmt.Sprintf("%s/late-%d", parent, count)}
			if _, _, code := s.writeLocked([]wire.Request{child}, 0); code != wire.CodeOK {
				s.t.Errorf("create %s: %v", child.Path, code)
			}
		}
	}
	return func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return count
	}
}

func TestDeleteAllEmptiesANodeAgainWhenItGetsAChildMeanwhile(t *testing.T) {
	s := newFakeServer(t)
	c := dialFake(t, []string{s.listen()})
	mustCreate(t, c, "/a", nil, Persistent)
	mustCreate(t, c, "/a/x", nil, Persistent)
	deletes := addChildAtDelete(s, "/a", 2)
	n, err := c.DeleteAll(context.Background(), "/a")
	if err != nil || n != 4 {
		t.Fatalf("DeleteAll = %d, %v; want 4 (/a/x, two late children, /a)", n, err)
	}
	if got := deletes(); got != 3 {
		t.Errorf("/a was deleted %d times, want 3", got)
	}
	if s.node("/a") != nil {
		t.Error("/a is still there")
	}
}

func TestDeleteAllGivesUpOnANodeThatKeepsGettingChildren(t *testing.T) {
	s := newFakeServer(t)
	c := dialFake(t, []string{s.listen()})
	mustCreate(t, c, "/a", nil, Persistent)
	deletes := addChildAtDelete(s, "/a", 1000)
	n, err := c.DeleteAll(context.Background(), "/a")
	var oe *OpError
	if !errors.Is(err, ErrNotEmpty) || !errors.As(err, &oe) || oe.Op != "delete" || oe.Path != "/a" {
		t.Fatalf("DeleteAll = %d, %v; want the delete of /a failing with ErrNotEmpty", n, err)
	}
	if got := deletes(); got != deleteAllRetries+1 {
		t.Errorf("/a was deleted %d times, want %d", got, deleteAllRetries+1)
	}
	if n != deleteAllRetries {
		t.Errorf("DeleteAll counted %d deleted, want the %d late children it emptied /a of", n, deleteAllRetries)
	}
}
