package server

import (
	"strings"

	"github.com/arbor-coord/arbor/wire"
)

// checkPaths refuses a request that names a path over the length limits
// (Config.MaxPath, Config.MaxName) or not valid (wire.ValidatePath). Every
// path a request names (wire.Request.Paths) is checked here, as the codec
// decodes the request, whichever the protocol and the op: the ops that
// leave state behind without reading the tree (setWatches, addWatch) are
// held to the same rules as a getData. (ZooKeeper's protocol takes any
// string as getEphemerals' prefix: its codec checks only the length.)
func (c *conn) checkPaths(req *wire.Request) error {
	for p, sequential := range req.Paths {
		if err := c.checkPath(p, sequential); err != nil {
			return err
		}
	}
	return c.checkWaiter(req)
}

// checkWaiter refuses a getData or exists whose lock waiter
// (wire.Request.Waiter) is not the name of a node beside the one it
// reads, or comes without the data watch it is told of the turn by.
func (c *conn) checkWaiter(req *wire.Request) error {
	switch {
	case req.Waiter == "":
		return nil
	case !req.Watch:
		return wire.Errorf(wire.CodeBadArguments, "waiter %.40q without a watch", req.Waiter)
	case strings.Contains(req.Waiter, "/"):
		return wire.Errorf(wire.CodeBadArguments, "waiter %.40q is not the name of a node", req.Waiter)
	}
	return c.checkPath(strings.TrimSuffix(parent(req.Path), "/")+"/"+req.Waiter, false)
}

// checkPath checks one path, the prefix of a sequential create if
// sequential. The lengths go first: the syntax error of a huge path would
// quote it whole.
func (c *conn) checkPath(p string, sequential bool) error {
	if err := c.checkPathLength(p, sequential); err != nil {
		return err
	}
	return wire.ValidatePath(p, sequential)
}

// checkPathLength refuses a path, or a prefix, over the path or the name
// length limit. A sequential create's path and last name are counted with
// the digits the server will append to them. Lengths are in bytes.
func (c *conn) checkPathLength(p string, sequential bool) error {
	suffix, counted := 0, ""
	if sequential {
		suffix, counted = wire.SequenceDigits, ", its sequence number included,"
	}
	cfg := &c.srv.cfg
	if n := len(p) + suffix; over(n, cfg.MaxPath) {
		return c.srv.limits.refuse(c.log, limitPathLength, wire.CodeBadArguments,
			"path %.40q... of %d bytes%s is over the %d-byte limit (--max-path)", p, n, counted, cfg.MaxPath)
	}
	if cfg.MaxName < 0 {
		return nil
	}
	for rest := p; ; {
		name, after, more := strings.Cut(rest, "/")
		n := len(name)
		if !more {
			n += suffix
		}
		if over(n, cfg.MaxName) {
			return c.srv.limits.refuse(c.log, limitNameLength, wire.CodeBadArguments,
				"name %.40q... of %d bytes%s is over the %d-byte limit (--max-name)", name, n, counted, cfg.MaxName)
		}
		if !more {
			return nil
		}
		rest = after
	}
}
