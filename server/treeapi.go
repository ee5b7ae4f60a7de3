package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/arbor-coord/arbor/shardmap"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

// The tree API, under /api/v1/tree/PATH: read a node with a page of its
// children, create, set and delete, and follow a node's changes as
// server-sent events (/api/v1/watch/PATH). Every request runs with the
// caller's identities (HTTPIdentities) through the ACL checks of the
// binary protocol, and every write through the raft log. The web console
// renders the same views (docs/http-api.md).

// Children pages: how many children a read lists unless ?limit says, and
// at most.
const (
	DefaultChildPage = 100
	MaxChildPage     = 1000
)

// maxDeleteAll bounds the nodes a recursive delete removes in one request.
const maxDeleteAll = 100_000

// NodeView is a node as the tree API shows it: its data, Stat and ACL,
// and one page of its children.
type NodeView struct {
	Path     string      `json:"path"`
	Data     []byte      `json:"data"`   // base64 in JSON
	Format   string      `json:"format"` // how Data reads: "json", "text" (UTF-8) or "binary"
	Stat     StatView    `json:"stat"`
	ACL      []ACLView   `json:"acl"`
	Children []ChildView `json:"children"` // sorted by name, from Offset
	Offset   int         `json:"offset"`
	Total    int         `json:"children_total"`
	Zxid     int64       `json:"zxid"` // the last txn this member had applied when it read the node
}

// StatView is a node's Stat, its times in RFC 3339 and its session in hex.
type StatView struct {
	Czxid          int64  `json:"czxid"`
	Mzxid          int64  `json:"mzxid"`
	Pzxid          int64  `json:"pzxid"`
	Ctime          string `json:"ctime"`
	Mtime          string `json:"mtime"`
	Version        int32  `json:"version"`
	Cversion       int32  `json:"cversion"`
	Aversion       int32  `json:"aversion"`
	EphemeralOwner string `json:"ephemeral_owner,omitempty"` // the owning session, in hex
	DataLength     int32  `json:"data_length"`
	NumChildren    int32  `json:"num_children"`
}

// ACLView is one entry of an ACL; Perms as ZooKeeper's letters (cdrwa).
type ACLView struct {
	Scheme string `json:"scheme"`
	ID     string `json:"id"`
	Perms  string `json:"perms"`
}

// ChildView is a child in a node's listing. Its details are left out
// (Hidden) when the caller may not read it.
type ChildView struct {
	Name        string `json:"name"`
	Hidden      bool   `json:"hidden,omitempty"`
	Ephemeral   bool   `json:"ephemeral,omitempty"`
	Sequential  bool   `json:"sequential,omitempty"` // its name ends in a sequence number
	NumChildren int32  `json:"num_children"`
	DataLength  int32  `json:"data_length"`
}

func statView(st wire.Stat) StatView {
	v := StatView{Czxid: st.Czxid, Mzxid: st.Mzxid, Pzxid: st.Pzxid, Ctime: msTime(st.Ctime), Mtime: msTime(st.Mtime),
		Version: st.Version, Cversion: st.Cversion, Aversion: st.Aversion, DataLength: st.DataLength, NumChildren: st.NumChildren}
	if st.EphemeralOwner != 0 {
		v.EphemeralOwner = leaseID(st.EphemeralOwner)
	}
	return v
}

// msTime is a time in ms since the Unix epoch in RFC 3339, UTC.
func msTime(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }

// dataFormat says how data reads: as JSON, as text or as bytes.
func dataFormat(data []byte) string {
	switch {
	case len(data) > 0 && json.Valid(data):
		return "json"
	case utf8.Valid(data):
		return "text"
	}
	return "binary"
}

// sequential reports whether a node's name ends in a sequence number.
func sequential(name string) bool {
	const digits = 10
	if len(name) < digits {
		return false
	}
	for _, c := range name[len(name)-digits:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Node reads the node at path as ids may: its data, Stat, ACL (digests
// masked unless ids have ADMIN) and limit of its children from offset.
// It needs READ on the node.
func (s *Server) Node(ids []wire.Identity, path string, offset, limit int) (NodeView, error) {
	if err := wire.ValidatePath(path, false); err != nil {
		return NodeView{}, badRequest("%v", err)
	}
	if offset < 0 || limit < 1 || limit > MaxChildPage {
		return NodeView{}, badRequest("offset is 0 or more, limit 1 to %d", MaxChildPage)
	}
	g, err := s.groupOfPath(path)
	if err != nil {
		return NodeView{}, err
	}
	var v NodeView
	v.Zxid = g.fsm.read(func(t *tree.Tree) { err = s.readNode(t, ids, path, offset, limit, &v) })
	return v, err
}

// readNode reads the node at path for ids from t, under its read lock,
// with a page of its children; the children of a listing that spans the
// shards (/, a partitioned parent) from each one's shard.
func (s *Server) readNode(t *tree.Tree, ids []wire.Identity, path string, offset, limit int, v *NodeView) error {
	if err := t.Check(path, ids, wire.PermRead); err != nil {
		return err
	}
	data, st, err := t.Get(path)
	if err != nil {
		return err
	}
	acl, _, _ := t.ACL(path)
	if t.Check(path, ids, wire.PermAdmin) != nil {
		acl = maskDigests(acl)
	}
	names, _, _ := t.Children(path)
	childTree := func(child string, read func(*tree.Tree)) { read(t) }
	if s.isMergedListing(path) {
		names, _, _ = s.mergedChildren(t, path)
		childTree = func(child string, read func(*tree.Tree)) {
			if g, err := s.groupOfPath(child); err == nil && g.id != shardmap.MetaGroup {
				g.fsm.read(read)
			} else {
				read(t)
			}
		}
	}
	slices.Sort(names)
	*v = NodeView{Path: path, Data: data, Format: dataFormat(data), Stat: statView(st), Offset: offset, Total: len(names),
		ACL: []ACLView{}, Children: []ChildView{}}
	for _, a := range acl {
		v.ACL = append(v.ACL, ACLView{Scheme: a.Scheme, ID: a.ID, Perms: a.Perms.String()})
	}
	for _, name := range names[min(offset, len(names)):min(offset+limit, len(names))] {
		child := strings.TrimSuffix(path, "/") + "/" + name
		c := ChildView{Name: name, Sequential: sequential(name)}
		childTree(child, func(t *tree.Tree) {
			if t.Check(child, ids, wire.PermRead) != nil {
				c.Hidden = true
			} else if cst, err := t.Exists(child); err == nil {
				c.Ephemeral, c.NumChildren, c.DataLength = cst.EphemeralOwner != 0, cst.NumChildren, cst.DataLength
			}
		})
		if !c.Hidden && s.isMergedListing(child) { // a partitioned parent: its children are the shards'
			if kids, _, err := s.mergedChildren(t, child); err == nil {
				c.NumChildren = int32(len(kids))
			}
		}
		v.Children = append(v.Children, c)
	}
	return nil
}

// handleTreeAPI adds the tree API's endpoints to mux.
func (s *Server) handleTreeAPI(mux *http.ServeMux) {
	for _, p := range []string{"/api/v1/tree", "/api/v1/tree/{path...}"} {
		mux.HandleFunc("GET "+p, s.apiNode)
		mux.HandleFunc("POST "+p, answering(s.apiCreate))
		mux.HandleFunc("PUT "+p, answering(s.apiSet))
		mux.HandleFunc("DELETE "+p, answering(s.apiDelete))
		mux.HandleFunc(p, methodNotAllowed("GET, POST, PUT, DELETE"))
	}
	for _, p := range []string{"/api/v1/watch", "/api/v1/watch/{path...}"} {
		mux.HandleFunc("GET "+p, s.apiWatch)
		mux.HandleFunc(p, methodNotAllowed("GET"))
	}
}

// nodePath is the node path named in r's URL, checked.
func nodePath(r *http.Request) (string, error) {
	p := "/" + r.PathValue("path")
	if err := wire.ValidatePath(p, false); err != nil {
		return "", badRequest("%v", err)
	}
	return p, nil
}

// intParam reads the integer query parameter name, def when it is absent.
func intParam(r *http.Request, name string, def int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, badRequest("?%s=%q is not a number", name, v)
	}
	return n, nil
}

// apiNode answers GET /api/v1/tree/PATH?offset=&limit=.
func (s *Server) apiNode(w http.ResponseWriter, r *http.Request) {
	path, err := nodePath(r)
	var offset, limit int
	if err == nil {
		offset, err = intParam(r, "offset", 0)
	}
	if err == nil {
		limit, err = intParam(r, "limit", DefaultChildPage)
	}
	var v NodeView
	if err == nil {
		v, err = s.Node(s.HTTPIdentities(r), path, offset, limit)
	}
	writeJSON(w, v, treeError(err))
}

// treeError gives the tree's errors the HTTP status they mean.
func treeError(err error) error {
	var status int
	switch {
	case err == nil:
		return nil
	case errors.Is(err, wire.ErrNoNode):
		status = http.StatusNotFound
	case errors.Is(err, wire.ErrBadVersion):
		return &apiError{http.StatusConflict, "conflict: the node changed since the version given (" + err.Error() + "); read it again"}
	case errors.Is(err, wire.ErrNodeExists), errors.Is(err, wire.ErrNotEmpty):
		status = http.StatusConflict
	case errors.Is(err, wire.ErrDataTooLarge):
		status = http.StatusRequestEntityTooLarge
	case errors.Is(err, wire.ErrNoChildrenForEphemerals), errors.Is(err, wire.ErrInvalidACL):
		status = http.StatusBadRequest
	default:
		return err
	}
	return &apiError{status, err.Error()}
}

// nodeData is the data of a create or set: a string, as text or base64.
type nodeData struct {
	Data     string `json:"data"`
	Encoding string `json:"encoding"` // "text" (the default) or "base64"
}

func (d *nodeData) bytes() ([]byte, error) {
	switch d.Encoding {
	case "", "text":
		return []byte(d.Data), nil
	case "base64":
		b, err := base64.StdEncoding.DecodeString(d.Data)
		if err != nil {
			return nil, badRequest("data is not base64: %v", err)
		}
		return b, nil
	}
	return nil, badRequest("encoding %q is not text or base64", d.Encoding)
}

// createModes are the create modes the tree API offers: a node without
// a session, so no ephemerals.
var createModes = map[string]wire.CreateMode{
	"": wire.ModePersistent, "persistent": wire.ModePersistent,
	"sequential": wire.ModePersistentSequential, "container": wire.ModeContainer,
}

// apiCreate answers POST /api/v1/tree/PATH {"data", "encoding", "mode"}:
// it creates the node (with the default ACL) and answers its path.
func (s *Server) apiCreate(ctx context.Context, w http.ResponseWriter, r *http.Request) (any, error) {
	var req struct {
		nodeData
		Mode string `json:"mode"`
	}
	path, err := nodePath(r)
	if err == nil {
		err = decodeBody(w, r, &req)
	}
	mode, ok := createModes[req.Mode]
	if err == nil && !ok {
		err = badRequest("mode %q is not persistent, sequential or container", req.Mode)
	}
	var data []byte
	if err == nil {
		data, err = req.bytes()
	}
	if err != nil {
		return nil, err
	}
	if path == "/" {
		return nil, &apiError{http.StatusConflict, "the root exists"}
	}
	res, err := s.writeRequest(ctx, r, &wire.Request{Op: wire.OpCreate, Path: path, Data: data, Mode: mode})
	if err != nil {
		return nil, treeError(err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	return map[string]string{"path": res.Path}, nil
}

// apiSet answers PUT /api/v1/tree/PATH {"data", "encoding", "version"}:
// it sets the node's data if its version is still the one given (-1:
// whatever it is), and answers the new Stat.
func (s *Server) apiSet(ctx context.Context, w http.ResponseWriter, r *http.Request) (any, error) {
	var req struct {
		nodeData
		Version *int32 `json:"version"`
	}
	path, err := nodePath(r)
	if err == nil {
		err = decodeBody(w, r, &req)
	}
	if err == nil && req.Version == nil {
		err = badRequest("version is required: the version the data was read at, or -1 for any")
	}
	var data []byte
	if err == nil {
		data, err = req.bytes()
	}
	if err != nil {
		return nil, err
	}
	res, err := s.writeRequest(ctx, r, &wire.Request{Op: wire.OpSetData, Path: path, Data: data, Version: *req.Version})
	if err != nil {
		return nil, treeError(err)
	}
	return map[string]StatView{"stat": statView(res.Stat)}, nil
}

// apiDelete answers DELETE /api/v1/tree/PATH?version=N&recursive=true:
// it deletes the node if its version is N (default -1: any); recursive,
// its descendants first, each as it is when it is deleted. As
// client.DeleteAll, a recursive delete leaves ZooKeeper's system nodes
// (wire.IsSystemNode) in place, and empties them: DELETE
// /api/v1/tree/zookeeper/quota?recursive=true deletes every quota.
func (s *Server) apiDelete(ctx context.Context, w http.ResponseWriter, r *http.Request) (any, error) {
	path, err := nodePath(r)
	version := int64(-1)
	if v := r.URL.Query().Get("version"); err == nil && v != "" {
		if version, err = strconv.ParseInt(v, 10, 32); err != nil {
			err = badRequest("?version=%q is not a node version (-1 for any)", v)
		}
	}
	recursive := r.URL.Query().Get("recursive")
	if err == nil && recursive != "" && recursive != "true" && recursive != "false" {
		err = badRequest("?recursive=%q is not true or false", recursive)
	}
	if err == nil && path == "/" {
		err = badRequest("the root cannot be deleted")
	}
	if err != nil {
		return nil, err
	}
	var below []string
	if recursive == "true" {
		// The version first, through the log: a refused delete deletes
		// nothing below either. (A change after it can still refuse the
		// node's own delete, with its descendants gone: the delete is
		// not atomic, as ZooKeeper's deleteall is not.)
		if version != -1 {
			if _, err := s.writeRequest(ctx, r, &wire.Request{Op: wire.OpCheck, Path: path, Version: int32(version)}); err != nil {
				return nil, treeError(err)
			}
		}
		below, err = s.descendants(path, s.HTTPIdentities(r))
		if err != nil {
			return nil, treeError(err)
		}
	}
	deleted := 0
	for _, p := range below {
		_, err := s.writeRequest(ctx, r, &wire.Request{Op: wire.OpDelete, Path: p, Version: -1})
		if err != nil && !errors.Is(err, wire.ErrNoNode) {
			return nil, treeError(fmt.Errorf("deleting %s (after %d nodes below %s): %w", p, deleted, path, err))
		}
		deleted++
	}
	if recursive == "true" && wire.IsSystemNode(path) {
		return map[string]int{"deleted": deleted}, nil
	}
	if _, err := s.writeRequest(ctx, r, &wire.Request{Op: wire.OpDelete, Path: path, Version: int32(version)}); err != nil {
		return nil, treeError(err)
	}
	return map[string]int{"deleted": deleted + 1}, nil
}

// descendants lists the nodes below path, deepest first, so that each
// is deleted after its children: as ids may list them (READ on each node
// whose children it lists), at most maxDeleteAll of them, and none of
// the system nodes, which stay.
func (s *Server) descendants(path string, ids []wire.Identity) ([]string, error) {
	g, err := s.groupOfPath(path)
	if err != nil {
		return nil, err
	}
	var out []string
	g.fsm.read(func(t *tree.Tree) {
		var walk func(p string)
		walk = func(p string) {
			if err != nil {
				return
			}
			if err = t.Check(p, ids, wire.PermRead); err != nil {
				err = fmt.Errorf("listing %s for a recursive delete: %w", p, err)
				return
			}
			names, _, _ := t.Children(p)
			for _, name := range names {
				if len(out) == maxDeleteAll {
					err = badRequest("%s has more than %d nodes below it: a recursive delete removes at most %d", path, maxDeleteAll, maxDeleteAll)
				}
				if err != nil {
					return
				}
				child := strings.TrimSuffix(p, "/") + "/" + name
				walk(child)
				if !wire.IsSystemNode(child) {
					out = append(out, child)
				}
			}
		}
		walk(path)
	})
	return out, err
}

// writeRequest writes req for r's caller, with r's identities, through
// the checks a binary client's write takes.
func (s *Server) writeRequest(ctx context.Context, r *http.Request, req *wire.Request) (*tree.Result, error) {
	ids := s.HTTPIdentities(r)
	if err := s.admit(req); err != nil {
		return nil, err
	}
	if err := s.resolveACLs(req, ids); err != nil {
		return nil, err
	}
	txn := tree.TxnFromRequest(req, 0, time.Now().UnixMilli(), ids)
	return s.write(ctx, &txn)
}

// nodeState is what the tree API's event stream sends of a node.
type nodeState struct {
	Path    string `json:"path"`
	Exists  bool   `json:"exists"`
	Mzxid   int64  `json:"mzxid,omitempty"`
	Pzxid   int64  `json:"pzxid,omitempty"`
	Version int32  `json:"version"`
	Zxid    int64  `json:"zxid"` // the last txn applied when it was read
}

// apiWatch streams the node at PATH's state as server-sent events: one
// "node" event at once and one after each change to the node or its
// children (its data, its existence, its list of children), until the
// client goes. A node the caller may not read streams nothing but an
// error.
func (s *Server) apiWatch(w http.ResponseWriter, r *http.Request) {
	path, err := nodePath(r)
	if err != nil {
		writeJSON(w, nil, err)
		return
	}
	ids := s.HTTPIdentities(r)
	var st nodeState
	read := func() error {
		st = nodeState{Path: path}
		g, err := s.groupOfPath(path)
		if err != nil {
			return err
		}
		st.Zxid = g.fsm.read(func(t *tree.Tree) {
			if err = t.Check(path, ids, wire.PermRead); errors.Is(err, wire.ErrNoNode) {
				err = nil
				return
			}
			stat, _ := t.Exists(path)
			st.Exists, st.Mzxid, st.Pzxid, st.Version = true, stat.Mzxid, stat.Pzxid, stat.Version
		})
		return err
	}
	if err := read(); err != nil {
		writeJSON(w, nil, err)
		return
	}
	var sent nodeState
	first := true
	s.stream(w, r, s.nodeWatch, path, func() bool {
		if read() != nil {
			return false
		}
		if first || st.Exists != sent.Exists || st.Mzxid != sent.Mzxid || st.Pzxid != sent.Pzxid {
			first, sent = false, st
			return sendEvent(w, "node", st)
		}
		return true
	})
}

// sendEvent writes v as a server-sent event of type kind and flushes it;
// false when the client has gone.
func sendEvent(w http.ResponseWriter, kind string, v any) bool {
	data, _ := json.Marshal(v)
	if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", kind, data); err != nil {
		return false
	}
	w.(http.Flusher).Flush()
	return true
}
