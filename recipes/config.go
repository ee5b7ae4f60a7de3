package recipes

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/arbor-coord/arbor/client"
)

// configBuffer is the capacity of a ConfigValue's Watch channel.
const configBuffer = 1024

// ConfigValue follows one node's value with a persistent watch whose
// events carry each new value, so a watcher sees every committed value in
// order, with no read. The last known value stays available while the
// client is disconnected, and after its session ends.
type ConfigValue struct {
	c    *client.Client
	path string
	opts []Option

	mu      sync.Mutex // guards value, stat, known and watched
	value   []byte
	stat    client.Stat // Czxid 0: no node
	known   bool        // the node has been read once
	watch   chan []byte
	watched bool // Watch was called: wait for its reader
	stop    context.CancelFunc
	done    chan struct{}
}

// NewConfigValue starts following the node at path (which need not exist)
// on the session of c. Close stops it. Of the options, WithACL applies, to
// the nodes Set creates.
func NewConfigValue(c *client.Client, path string, opts ...Option) *ConfigValue {
	ctx, cancel := context.WithCancel(context.Background())
	cv := &ConfigValue{c: c, path: path, opts: opts, watch: make(chan []byte, configBuffer), stop: cancel, done: make(chan struct{})}
	go cv.run(ctx)
	return cv
}

// Value returns the last known value: nil if the node does not exist (or
// before the first read), never nil for an existing node.
func (cv *ConfigValue) Value() []byte {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	return cv.value
}

// Watch returns a channel that receives the value read first, then each
// new value in order. A missing or deleted node is a nil value; an
// existing node's value is never nil, even when empty. It buffers
// 1,024 values; once Watch has been called the cache waits for a reader
// that falls behind. It is closed by Close or at the session's end for
// good. After a rebuild (lost events, a renewed session) it receives the
// value read again, if it differs.
func (cv *ConfigValue) Watch() <-chan []byte {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	cv.watched = true
	return cv.watch
}

// Set writes value with SetConfig, with the options of NewConfigValue.
func (cv *ConfigValue) Set(ctx context.Context, value []byte, expectedVersion int32) error {
	return SetConfig(ctx, cv.c, cv.path, value, expectedVersion, cv.opts...)
}

// SetConfig writes value at path if the node is at expectedVersion (-1:
// any version), creating the node, and its missing ancestors as
// containers, if it does not exist and expectedVersion is -1. Of the
// options, WithACL applies, to the nodes it creates.
func SetConfig(ctx context.Context, c *client.Client, path string, value []byte, expectedVersion int32, opts ...Option) error {
	acl := newOptions(opts).acl
	for {
		_, err := c.Set(ctx, path, value, expectedVersion)
		if !errors.Is(err, client.ErrNoNode) || expectedVersion != -1 {
			return opError("set", path, err)
		}
		if err := makeDirs(ctx, c, parentOf(path), acl); err != nil {
			return opError("set", path, err)
		}
		_, err = c.Create(ctx, path, value, client.Persistent, acl...)
		if !errors.Is(err, client.ErrNodeExists) {
			return opError("set", path, err)
		}
	}
}

// Close stops following the node.
func (cv *ConfigValue) Close() {
	cv.stop()
	<-cv.done
}

func (cv *ConfigValue) run(ctx context.Context) {
	defer close(cv.done)
	defer close(cv.watch)
	for delay := time.Duration(0); ; delay = min(max(2*delay, 50*time.Millisecond), time.Second) {
		if sleep(ctx, delay) != nil || final(cv.c) {
			return
		}
		watch, err := cv.c.AddWatch(ctx, cv.path, client.WatchPersistent)
		if err != nil {
			continue
		}
		data, st, err := cv.c.Get(ctx, cv.path)
		switch {
		case errors.Is(err, client.ErrNoNode):
			data, st = nil, client.Stat{}
		case err != nil:
			cv.c.RemoveWatch(context.WithoutCancel(ctx), cv.path, client.WatchPersistent)
			continue
		}
		if !cv.update(ctx, data, st, 0) {
			return
		}
		delay = 0
		if !cv.follow(ctx, watch) {
			cv.c.RemoveWatch(context.WithoutCancel(ctx), cv.path, client.WatchPersistent)
			return
		}
	}
}

// follow applies the watch's events until it ends; false if ctx ended.
func (cv *ConfigValue) follow(ctx context.Context, watch <-chan client.Event) bool {
	for {
		select {
		case ev, open := <-watch:
			switch {
			case !open, ev.Type == client.EventSession, ev.Type == client.EventWatchRemoved:
				return true // lost track: read again
			case ev.Type == client.EventNodeCreated, ev.Type == client.EventNodeDataChanged:
				if !cv.update(ctx, ev.Data, ev.Stat, ev.Zxid) {
					return false
				}
			case ev.Type == client.EventNodeDeleted:
				if !cv.update(ctx, nil, client.Stat{}, ev.Zxid) {
					return false
				}
			}
		case <-ctx.Done():
			return false
		}
	}
}

// update takes the node's state (st.Czxid 0: no node) from a read, or from
// an event at zxid, and reports the value on Watch if it changed. An event
// the known state already includes (a read may see a change before its
// event comes) is skipped. It returns false if ctx ended while waiting for
// Watch's reader.
func (cv *ConfigValue) update(ctx context.Context, data []byte, st client.Stat, zxid int64) bool {
	if st.Czxid != 0 && data == nil {
		data = []byte{} // an empty value, not a missing node
	}
	cv.mu.Lock()
	old := cv.stat
	switch {
	case zxid != 0 && old.Czxid != 0 && zxid <= old.Mzxid, // an event the state includes
		cv.known && st.Czxid == old.Czxid && st.Mzxid == old.Mzxid: // nothing new
		cv.mu.Unlock()
		return true
	}
	cv.value, cv.stat, cv.known = slices.Clip(data), st, true
	watched := cv.watched
	cv.mu.Unlock()
	if !watched {
		select {
		case cv.watch <- data:
		default:
		}
		return true
	}
	select {
	case cv.watch <- data:
		return true
	case <-ctx.Done():
		return false
	}
}
