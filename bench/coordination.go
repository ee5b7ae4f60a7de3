package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"sync/atomic"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/recipes"
)

// prepareLock makes the sessions of lock: Contenders, each with a Mutex of
// its own on one path, taking it and releasing it in turn.
func prepareLock(ctx context.Context, r *runner) (*plan, error) {
	cs, err := dialN(ctx, r.cfg, r.cfg.Contenders)
	if err != nil {
		return nil, err
	}
	p := &plan{sessions: cs, primary: []opKind{opAcquire}}
	path := r.path + "/lock"
	for _, c := range cs {
		m := recipes.NewMutex(c, path)
		p.loops = append(p.loops, func(rec *recorder) {
			for {
				measured, ok := r.begin(1)
				if !ok {
					return
				}
				t0 := time.Now()
				err := m.Lock(r.stopped) // a waiter leaves the queue when the run ends
				if !r.done(rec, opAcquire, measured, t0, err) {
					return
				}
				if err != nil {
					continue
				}
				t1 := time.Now()
				if !r.done(rec, opRelease, measured, t1, m.Unlock(r.hard)) {
					return
				}
			}
		})
	}
	return p, nil
}

// stampLen is how much of the value the writer of watch stamps: whether
// the write is measured, and its send time.
const stampLen = 16

// prepareWatch makes the sessions and node of watch: Watchers sessions,
// each with a persistent watch on one node, and a writer that sets it
// again and again, each write as soon as the one before was answered. The
// writer stamps each value with its send time, so that a watcher's
// notification, which carries the value, tells its own latency.
func prepareWatch(ctx context.Context, r *runner) (*plan, error) {
	cs, err := dialN(ctx, r.cfg, r.cfg.Watchers+1)
	if err != nil {
		return nil, err
	}
	p := &plan{sessions: cs, primary: []opKind{opNotify}}
	writer, watchers := cs[0], cs[1:]
	node := r.path + "/watched"
	value := valueOf(max(r.cfg.Size, stampLen))
	if err := createAll(ctx, cs[:1], []string{node}, value, r.cfg.Timeout); err != nil {
		return p, err
	}
	events := make([]<-chan client.Event, len(watchers))
	err = inParallel(watchers, len(watchers), func(_ *client.Client, i int) error {
		ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
		defer cancel()
		var err error
		events[i], err = watchers[i].AddWatch(ctx, node, client.WatchPersistent)
		return err
	})
	if err != nil {
		return p, err
	}

	var last atomic.Int64 // the zxid of the writer's last write that succeeded
	written := make(chan struct{})
	p.loops = append(p.loops, func(rec *recorder) {
		defer close(written)
		buf := append([]byte(nil), value...)
		for {
			measured, ok := r.begin(int64(len(watchers)))
			if !ok {
				return
			}
			t0 := time.Now()
			stamp(buf, measured, t0.Sub(r.start))
			st, err := writer.Set(r.hard, node, buf, -1)
			if !r.done(rec, opSet, measured, t0, err) {
				return
			}
			if err == nil {
				last.Store(st.Mzxid)
			}
		}
	})
	for _, ch := range events {
		p.loops = append(p.loops, func(rec *recorder) { r.watch(rec, ch, written, &last) })
	}
	return p, nil
}

// watch times the notifications of ch until it has had the writer's last
// write (once written is closed, last holds its zxid).
func (r *runner) watch(rec *recorder, ch <-chan client.Event, written <-chan struct{}, last *atomic.Int64) {
	var seen int64 // the zxid of the latest notification
	finished := false
	for {
		select {
		case ev, open := <-ch:
			switch {
			case !open:
				rec.fail(errors.New("the watch ended"))
				return
			case ev.Type == client.EventSession || ev.Type == client.EventWatchRemoved:
				rec.fail(ev.Err)
				return
			case ev.Type != client.EventNodeDataChanged:
				continue
			}
			now := time.Since(r.start)
			measured, sent := unstamp(ev.Data)
			r.count(rec, opNotify, measured, now-sent)
			seen = ev.Zxid
		case <-written:
			finished, written = true, nil
		case <-r.hard.Done():
			rec.fail(r.hard.Err())
			return
		}
		if finished && seen >= last.Load() {
			return
		}
	}
}

// stamp writes into b whether the write is measured and its send time.
func stamp(b []byte, measured bool, sent time.Duration) {
	b[0] = 0
	if measured {
		b[0] = 1
	}
	binary.BigEndian.PutUint64(b[8:], uint64(sent))
}

// unstamp reads what stamp wrote.
func unstamp(b []byte) (measured bool, sent time.Duration) {
	if len(b) < stampLen {
		return false, 0
	}
	return b[0] == 1, time.Duration(binary.BigEndian.Uint64(b[8:]))
}

// prepareSession makes the loops of session: Workers goroutines opening a
// session and closing it, again and again.
func prepareSession(ctx context.Context, r *runner) (*plan, error) {
	p := &plan{primary: []opKind{opSession}}
	for range r.cfg.Workers {
		p.loops = append(p.loops, func(rec *recorder) {
			for {
				measured, ok := r.begin(1)
				if !ok {
					return
				}
				t0 := time.Now()
				c, err := client.Dial(r.hard, r.cfg.Servers, r.cfg.ClientOptions...)
				if !r.done(rec, opConnect, measured, t0, err) {
					return
				}
				if err != nil {
					continue
				}
				t1 := time.Now()
				c.Close()
				r.count(rec, opClose, measured, time.Since(t1))
				r.count(rec, opSession, measured, time.Since(t0))
			}
		})
	}
	return p, nil
}
