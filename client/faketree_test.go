package client

import (
	"fmt"
	"strings"

	"github.com/arbor-coord/arbor/wire"
)

// The fake server's tree: ZooKeeper's write semantics, enough for the
// client's tests.

// writeLocked applies ops atomically as one txn with one zxid, and fires
// their events. When an op fails nothing is applied and the results follow
// ZooKeeper's multi convention.
func (s *fakeServer) writeLocked(ops []wire.Request, session int64) ([]wire.OpResult, []fakeEvent, wire.Code) {
	work := make(map[string]*fakeNode, len(s.nodes))
	for p, n := range s.nodes {
		cp := *n
		work[p] = &cp
	}
	zxid := s.zxid + 1
	results := make([]wire.OpResult, len(ops))
	var events []fakeEvent
	for i := range ops {
		res, evs, code := applyOp(work, &ops[i], zxid, session)
		res.Op, res.Err = ops[i].Op, code
		results[i] = res
		if code == wire.CodeOK {
			events = append(events, evs...)
			continue
		}
		for j := range results {
			switch {
			case j < i:
				results[j] = wire.OpResult{Op: ops[j].Op}
			case j > i:
				results[j] = wire.OpResult{Op: ops[j].Op, Err: wire.CodeRuntimeInconsistency}
			}
		}
		return results, nil, code
	}
	s.nodes, s.zxid = work, zxid
	for _, ev := range events {
		s.fireLocked(ev)
	}
	return results, events, wire.CodeOK
}

func applyOp(work map[string]*fakeNode, req *wire.Request, zxid, session int64) (wire.OpResult, []fakeEvent, wire.Code) {
	var res wire.OpResult
	if req.Op == wire.OpCreate {
		return applyCreate(work, req, zxid, session)
	}
	n := work[req.Path]
	if n == nil {
		return res, nil, wire.CodeNoNode
	}
	version := n.stat.Version
	if req.Op == wire.OpSetACL {
		version = n.stat.Aversion // setACL checks the ACL's version
	}
	if req.Version != -1 && req.Version != version {
		return res, nil, wire.CodeBadVersion
	}
	switch req.Op {
	case wire.OpSetData:
		n.data = req.Data
		n.stat.Version++
		n.stat.Mzxid = zxid
		n.stat.DataLength = int32(len(req.Data))
		res.Stat = n.stat
		return res, []fakeEvent{{wire.EventNodeDataChanged, req.Path}}, wire.CodeOK
	case wire.OpDelete:
		if n.stat.NumChildren > 0 {
			return res, nil, wire.CodeNotEmpty
		}
		delete(work, req.Path)
		parent := parentOf(req.Path)
		p := work[parent]
		p.stat.Cversion++
		p.stat.NumChildren--
		p.stat.Pzxid = zxid
		return res, []fakeEvent{{wire.EventNodeDeleted, req.Path}, {wire.EventNodeChildrenChanged, parent}}, wire.CodeOK
	case wire.OpCheck:
		return res, nil, wire.CodeOK
	case wire.OpSetACL:
		n.acl = req.ACL
		n.stat.Aversion++
		res.Stat = n.stat
		return res, nil, wire.CodeOK
	}
	return res, nil, wire.CodeUnimplemented
}

func applyCreate(work map[string]*fakeNode, req *wire.Request, zxid, session int64) (wire.OpResult, []fakeEvent, wire.Code) {
	var res wire.OpResult
	if wire.ValidatePath(req.Path, req.Mode.IsSequential()) != nil || req.Path == "/" {
		return res, nil, wire.CodeBadArguments
	}
	parent := parentOf(req.Path)
	p := work[parent]
	switch {
	case p == nil:
		return res, nil, wire.CodeNoNode
	case p.stat.EphemeralOwner != 0:
		return res, nil, wire.CodeNoChildrenForEphemerals
	}
	path := req.Path
	if req.Mode.IsSequential() {
		path += fmt.Sprintf("%010d", p.stat.Cversion)
	}
	if work[path] != nil {
		return res, nil, wire.CodeNodeExists
	}
	n := &fakeNode{data: req.Data, acl: req.ACL, stat: wire.Stat{
		Czxid: zxid, Mzxid: zxid, Pzxid: zxid, DataLength: int32(len(req.Data)),
	}}
	if len(n.acl) == 0 {
		n.acl = wire.OpenACL
	}
	if req.Mode.IsEphemeral() {
		n.stat.EphemeralOwner = session
	}
	work[path] = n
	p.stat.Cversion++
	p.stat.NumChildren++
	p.stat.Pzxid = zxid
	res.Path, res.Stat = path, n.stat
	return res, []fakeEvent{{wire.EventNodeCreated, path}, {wire.EventNodeChildrenChanged, parent}}, wire.CodeOK
}

func parentOf(path string) string {
	i := strings.LastIndexByte(path, '/')
	if i <= 0 {
		return "/"
	}
	return path[:i]
}
