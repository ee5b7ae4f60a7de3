package recipes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/arbor-coord/arbor/client"
)

// Option configures a recipe.
type Option func(*options)

type options struct {
	data []byte
}

// WithData sets the data stored in the nodes a recipe creates (default:
// none). Operators see it next to each holder and waiter (`arbor locks`):
// a host name and process id is a good choice.
func WithData(data []byte) Option {
	return func(o *options) { o.data = slices.Clone(data) }
}

func newOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// Node kinds, the middle part of a queue node's name.
const (
	kindLock      = "lock"
	kindRead      = "read"
	kindWrite     = "write"
	kindCandidate = "n"
	kindLease     = "lease"
	kindMember    = "member"
)

// protectedMark starts every name a recipe gives its nodes, followed by a
// random id unique to the recipe value: _c_<32 hex digits>-<kind>-<sequence>.
const protectedMark = "_c_"

// seqDigits is the length of the sequence number the server appends.
const seqDigits = 10

// errGone says that the node a recipe value waited or held with is gone:
// its session ended, or someone deleted it.
var errGone = errors.New("the recipe's node is gone")

// queue is one recipe value's place among the ephemeral-sequential nodes
// under dir: it creates the value's node with a protected name, lists the
// nodes in sequence order and waits for its turn.
type queue struct {
	c      *client.Client
	dir    string
	prefix string // protectedMark + this value's id + "-"
	data   []byte
}

func newQueue(c *client.Client, dir string, data []byte) *queue {
	var id [16]byte
	_, _ = rand.Read(id[:]) // never fails
	return &queue{c: c, dir: dir, prefix: protectedMark + hex.EncodeToString(id[:]) + "-", data: data}
}

// entry is one node of a queue.
type entry struct {
	name string
	kind string
	seq  int64
}

// parseEntry reads a node name written by a recipe. Other names are not
// part of any queue.
func parseEntry(name string) (entry, bool) {
	if !strings.HasPrefix(name, protectedMark) || len(name) < seqDigits+2 {
		return entry{}, false
	}
	seq, err := strconv.ParseInt(name[len(name)-seqDigits:], 10, 64)
	rest, ok := strings.CutSuffix(name[:len(name)-seqDigits], "-")
	dash := strings.LastIndexByte(rest, '-')
	if err != nil || seq < 0 || !ok || dash < 0 {
		return entry{}, false
	}
	return entry{name: name, kind: rest[dash+1:], seq: seq}, true
}

func (q *queue) path(e entry) string { return q.dir + "/" + e.name }

// mine reports whether e was created by this recipe value.
func (q *queue) mine(e entry) bool { return strings.HasPrefix(e.name, q.prefix) }

// entries lists the queue in sequence order; a missing dir is an empty
// queue.
func (q *queue) entries(ctx context.Context) ([]entry, error) {
	for {
		names, _, err := q.c.Children(ctx, q.dir)
		switch {
		case errors.Is(err, client.ErrNoNode):
			return nil, nil
		case errors.Is(err, client.ErrConnectionLoss):
			continue // the client waits for the reconnect
		case err != nil:
			return nil, err
		}
		return sortEntries(names), nil
	}
}

func sortEntries(names []string) []entry {
	es := make([]entry, 0, len(names))
	for _, n := range names {
		if e, ok := parseEntry(n); ok {
			es = append(es, e)
		}
	}
	slices.SortFunc(es, func(a, b entry) int { return int(a.seq - b.seq) })
	return es
}

// enqueue creates this value's node of kind, with the dir if it is
// missing, and returns it with its czxid. A create whose answer was lost
// with the connection is found again by the value's prefix.
func (q *queue) enqueue(ctx context.Context, kind string, data []byte) (entry, int64, error) {
	for {
		p, st, err := q.c.CreateStat(ctx, q.dir+"/"+q.prefix+kind+"-", data, client.EphemeralSequential)
		switch {
		case err == nil:
			e, _ := parseEntry(p[len(q.dir)+1:])
			return e, st.Czxid, nil
		case errors.Is(err, client.ErrNoNode):
			if err := makeDirs(ctx, q.c, q.dir); err != nil {
				return entry{}, 0, err
			}
		case errors.Is(err, client.ErrConnectionLoss):
			e, czxid, err := q.findOwn(ctx, kind)
			if err != nil || e.name != "" {
				return e, czxid, err
			}
		default:
			return entry{}, 0, err
		}
	}
}

// findOwn looks for a node of kind that this value created in this
// session. A node of this value's left by another session (one that has
// expired and not yet been cleaned up) is deleted, never adopted.
func (q *queue) findOwn(ctx context.Context, kind string) (entry, int64, error) {
	es, err := q.entries(ctx)
	if err != nil {
		return entry{}, 0, err
	}
	for _, e := range es {
		if !q.mine(e) || e.kind != kind {
			continue
		}
		ok, st, err := q.c.Exists(ctx, q.path(e))
		switch {
		case errors.Is(err, client.ErrConnectionLoss):
			return q.findOwn(ctx, kind)
		case err != nil:
			return entry{}, 0, err
		case !ok:
			continue
		case st.EphemeralOwner != q.c.SessionID():
			if err := q.remove(ctx, q.path(e)); err != nil {
				return entry{}, 0, err
			}
			continue
		}
		return e, st.Czxid, nil
	}
	return entry{}, 0, nil
}

// blocker returns the index of the entry that entry i must wait for, or
// -1 when i may go ahead.
type blocker func(es []entry, i int) int

// predecessor makes each entry wait for the one just before it: a lock
// waiter, a writer, a candidate.
func predecessor(_ []entry, i int) int { return i - 1 }

// errWouldBlock is what turn returns when told not to wait.
var errWouldBlock = errors.New("would block")

// turn waits until blocking finds nothing ahead of me that it must wait
// for, watching only that one node each time. With wait false it returns
// errWouldBlock instead of waiting. Nodes of this value's other than me
// (left by an earlier create whose answer was lost) are deleted.
func (q *queue) turn(ctx context.Context, me entry, blocking blocker, wait bool) error {
	for {
		all, err := q.entries(ctx)
		if err != nil {
			return err
		}
		es := all[:0:0]
		for _, e := range all {
			if e.name != me.name && q.mine(e) {
				if err := q.remove(ctx, q.path(e)); err != nil {
					return err
				}
				continue
			}
			es = append(es, e)
		}
		i := slices.IndexFunc(es, func(e entry) bool { return e.name == me.name })
		if i < 0 {
			return q.gone()
		}
		b := blocking(es, i)
		if b < 0 {
			return nil
		}
		if !wait {
			return errWouldBlock
		}
		_, _, ev, err := q.c.GetW(ctx, q.path(es[b]))
		switch {
		case errors.Is(err, client.ErrNoNode), errors.Is(err, client.ErrConnectionLoss):
			continue
		case err != nil:
			return err
		}
		if err := waitEvent(ctx, ev); err != nil {
			return err
		}
	}
}

// gone is the error for this value's node having vanished: the session's
// end if that is why, else errGone.
func (q *queue) gone() error {
	if err := q.c.Err(); err != nil {
		return err
	}
	return errGone
}

// remove deletes the node at path, trying again through connection loss,
// until it is gone, the session is over (which deletes it too) or ctx
// ends.
func (q *queue) remove(ctx context.Context, path string) error {
	for {
		err := q.c.Delete(ctx, path, -1)
		switch {
		case err == nil, errors.Is(err, client.ErrNoNode):
			return nil
		case errors.Is(err, client.ErrConnectionLoss):
			continue
		case q.c.Err() != nil:
			return nil // the session's end deleted the node
		}
		return err
	}
}

// removeSoon deletes the node at path for a caller that may have given
// up: it waits for the deletion while ctx lives, and lets it finish in the
// background after that.
func (q *queue) removeSoon(ctx context.Context, path string) error {
	done := make(chan error, 1)
	go func() { done <- q.remove(context.WithoutCancel(ctx), path) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// makeDirs creates dir and its missing ancestors as containers, which the
// server deletes once they are empty again.
func makeDirs(ctx context.Context, c *client.Client, dir string) error {
	for i := 1; i <= len(dir); i++ {
		if i < len(dir) && dir[i] != '/' {
			continue
		}
		for {
			_, err := c.Create(ctx, dir[:i], nil, client.Container)
			if err == nil || errors.Is(err, client.ErrNodeExists) {
				break
			}
			if !errors.Is(err, client.ErrConnectionLoss) {
				return err
			}
		}
	}
	return nil
}

// opError names a recipe operation and path in err.
func opError(op, path string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s %s: %w", op, path, err)
}
