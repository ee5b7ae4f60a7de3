package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/arbor-coord/arbor/wire"
	"github.com/arbor-coord/arbor/zkwire"
)

// zkConn is a minimal ZooKeeper session for Config.Protocol "zk": the load
// of set, get, create and mixed through a ZooKeeper port, with the shape of
// Arbor's client (client/conn.go) so that only the protocol differs between
// the two: callers queue encoded frames, one writer writes what is queued
// and flushes when the queue is empty, one reader completes the calls by
// xid. It pings when idle; it has no watches, auth or reconnection, and a
// broken connection fails every call from then on.
//
// call may be called from any number of goroutines.
type zkConn struct {
	nc      net.Conn
	timeout time.Duration // the negotiated session timeout

	wake chan struct{} // one token: the queue has frames
	done chan struct{} // closed once the connection broke or was closed
	wg   sync.WaitGroup

	mu      sync.Mutex // guards the fields below
	xid     int32
	queue   []byte // frames for the writer
	pending map[int32]*zkCall
	err     error // why the connection ended; set once
}

// zkCall is a request in flight.
type zkCall struct {
	op    zkwire.Op
	reply zkwire.Reply
	err   error
	done  chan struct{}
}

// zkSessionTimeout is the session timeout the load's sessions ask for.
const zkSessionTimeout = 10 * time.Second

// errZKConnClosed fails the calls of a zkConn that was closed.
var errZKConnClosed = errors.New("zk connection closed")

// dialZK opens a session on one of servers, picked at random (as
// client.Dial picks one).
func dialZK(ctx context.Context, servers []string) (*zkConn, error) {
	addr := servers[rand.IntN(len(servers))]
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	br := bufio.NewReaderSize(nc, 64<<10)
	req := zkwire.ConnectRequest{TimeOut: int32(zkSessionTimeout / time.Millisecond), Passwd: make([]byte, zkwire.PasswordSize)}
	if _, err := nc.Write(zkwire.AppendConnectRequest(nil, &req)); err != nil {
		nc.Close()
		return nil, err
	}
	body, err := wire.ReadFrame(br, nil, 1<<20)
	var resp zkwire.ConnectResponse
	if err == nil {
		err = zkwire.DecodeConnectResponse(body, &resp)
	}
	if err == nil && resp.SessionID == 0 {
		err = fmt.Errorf("%s refused the session", addr)
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("ZooKeeper handshake with %s: %w", addr, err)
	}
	nc.SetDeadline(time.Time{})
	c := &zkConn{
		nc: nc, timeout: time.Duration(resp.TimeOut) * time.Millisecond,
		wake: make(chan struct{}, 1), done: make(chan struct{}),
		pending: make(map[int32]*zkCall),
	}
	c.wg.Add(2)
	go c.readLoop(br)
	go c.writeLoop()
	return c, nil
}

// call sends r (its Xid is set here) and waits for the reply. A reply with
// an error code fails with wire's sentinel for it.
func (c *zkConn) call(ctx context.Context, r *zkwire.Request) (*zkwire.Reply, error) {
	call := &zkCall{op: r.Op, done: make(chan struct{})}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	if c.xid++; c.xid <= 0 {
		c.xid = 1 // past MaxInt32: negative xids are the server's own
	}
	r.Xid = c.xid
	c.pending[r.Xid] = call
	c.queue = zkwire.AppendRequest(c.queue, r)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	select {
	case <-call.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if call.err != nil {
		return nil, call.err
	}
	if call.reply.Err != 0 {
		return nil, wire.Code(call.reply.Err).Err()
	}
	return &call.reply, nil
}

// writeLoop writes the queued frames, flushing when the queue is empty,
// and pings when nothing was written for a third of the session timeout.
func (c *zkConn) writeLoop() {
	defer c.wg.Done()
	bw := bufio.NewWriterSize(c.nc, 64<<10)
	idle := time.NewTimer(c.timeout / 3)
	defer idle.Stop()
	ping := zkwire.AppendRequest(nil, &zkwire.Request{Xid: zkwire.XidPing, Op: zkwire.OpPing})
	var out []byte
	for {
		select {
		case <-c.done:
			return
		case <-c.wake:
		case <-idle.C:
			bw.Write(ping)
		}
		for {
			c.mu.Lock()
			out, c.queue = c.queue, out[:0]
			c.mu.Unlock()
			if len(out) == 0 {
				break
			}
			bw.Write(out)
		}
		if err := bw.Flush(); err != nil {
			c.fail(err)
			return
		}
		idle.Reset(c.timeout / 3)
	}
}

// readLoop completes the calls by their replies' xids until the
// connection breaks.
func (c *zkConn) readLoop(br *bufio.Reader) {
	defer c.wg.Done()
	var buf []byte
	for {
		body, err := wire.ReadFrame(br, buf, 16<<20)
		if err != nil {
			c.fail(err)
			return
		}
		buf = body
		xid, err := zkwire.PeekXid(body)
		if err != nil {
			c.fail(err)
			return
		}
		if xid < 0 {
			continue // a ping's answer; the load sets no watches
		}
		c.mu.Lock()
		call := c.pending[xid]
		delete(c.pending, xid)
		c.mu.Unlock()
		if call == nil {
			c.fail(fmt.Errorf("a reply to xid %d, which is not in flight", xid))
			return
		}
		// Decoding copies nothing: what the caller keeps must not share buf.
		call.err = zkwire.DecodeReply(body, call.op, &call.reply)
		call.reply.Data = append([]byte(nil), call.reply.Data...)
		close(call.done)
	}
}

// fail ends the connection for err, failing every call in flight.
func (c *zkConn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = fmt.Errorf("%w: %w", wire.ErrConnectionLoss, err)
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	close(c.done)
	c.nc.Close()
	for _, call := range pending {
		call.err = c.err
		close(call.done)
	}
}

// close closes the session and the connection.
func (c *zkConn) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	c.call(ctx, &zkwire.Request{Op: zkwire.OpCloseSession})
	cancel()
	c.fail(errZKConnClosed)
	c.wg.Wait()
}

// set, get and create are the load's three ops, as client.Client's Set,
// Get and Create with a PersistentSequential node.
func (c *zkConn) set(ctx context.Context, path string, data []byte) error {
	_, err := c.call(ctx, &zkwire.Request{Op: zkwire.OpSetData, Path: path, Data: data, Version: -1})
	return err
}

func (c *zkConn) get(ctx context.Context, path string) error {
	_, err := c.call(ctx, &zkwire.Request{Op: zkwire.OpGetData, Path: path})
	return err
}

func (c *zkConn) createSequential(ctx context.Context, prefix string, data []byte) error {
	_, err := c.call(ctx, &zkwire.Request{Op: zkwire.OpCreate, Path: prefix, Data: data,
		ACL: zkwire.OpenACL, Flags: zkCreateSequential})
	return err
}

// zkCreateSequential is ZooKeeper's CreateMode PERSISTENT_SEQUENTIAL.
const zkCreateSequential = 2

// dialNZK opens n ZooKeeper sessions on cfg.ZKServers at once, each within
// cfg.Timeout.
func dialNZK(ctx context.Context, cfg Config, n int) ([]*zkConn, error) {
	cs := make([]*zkConn, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range cs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
			defer cancel()
			cs[i], errs[i] = dialZK(ctx, cfg.ZKServers)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeAllZK(cs)
		return nil, err
	}
	return cs, nil
}

// closeAllZK closes the sessions of cs (nil ones skipped) at once.
func closeAllZK(cs []*zkConn) {
	var wg sync.WaitGroup
	for _, c := range cs {
		if c != nil {
			wg.Go(c.close)
		}
	}
	wg.Wait()
}
