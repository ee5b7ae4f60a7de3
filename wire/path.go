package wire

import (
	"strings"
	"unicode/utf8"
)

// SequenceDigits is the number of digits a sequential create appends to
// its path: the parent's child counter, zero-padded.
const SequenceDigits = 10

// ValidatePath checks a znode path by ZooKeeper's rules: absolute, no empty
// segment, no "." or ".." segment, no trailing slash (except the root, and
// except the prefix of a sequential create, which gets a number appended),
// valid UTF-8 and no control or reserved characters. It returns an error
// matching ErrBadArguments that says what is wrong.
func ValidatePath(path string, sequential bool) error {
	if path == "" {
		return Errorf(CodeBadArguments, "invalid path: empty")
	}
	if path[0] != '/' {
		return Errorf(CodeBadArguments, "invalid path %q: not absolute", path)
	}
	if len(path) == 1 {
		return nil // the root, or "/" + a sequence number
	}
	if strings.HasSuffix(path, "/") && !sequential {
		return Errorf(CodeBadArguments, "invalid path %q: trailing slash", path)
	}
	check := path
	if sequential {
		check += "0" // the appended number makes a trailing segment non-empty
	}
	for i := 1; i < len(check); {
		j := strings.IndexByte(check[i:], '/')
		if j < 0 {
			j = len(check) - i
		}
		seg := check[i : i+j]
		switch seg {
		case "":
			return Errorf(CodeBadArguments, "invalid path %q: empty segment", path)
		case ".", "..":
			return Errorf(CodeBadArguments, "invalid path %q: relative segment %q", path, seg)
		}
		i += j + 1
	}
	if !utf8.ValidString(path) {
		return Errorf(CodeBadArguments, "invalid path %q: not UTF-8", path)
	}
	for _, r := range path {
		if badPathRune(r) {
			return Errorf(CodeBadArguments, "invalid path %q: character %U not allowed", path, r)
		}
	}
	return nil
}

// badPathRune reports the characters ZooKeeper refuses in a path.
func badPathRune(r rune) bool {
	return r == 0 ||
		(r > 0x00 && r <= 0x1f) ||
		(r >= 0x7f && r <= 0x9f) ||
		(r >= 0xd800 && r <= 0xf8ff) ||
		(r >= 0xfff0 && r <= 0xffff)
}

// Paths is an iterator (an iter.Seq2) over every path r names, each with
// whether it is the prefix of a sequential create (the server appends
// SequenceDigits digits to it): the path of an op on a node,
// getEphemerals' prefix, the paths of a multi's sub-requests and the watch
// lists of setWatches and setWatches2. Ops that name no path (ping, auth,
// close, the admin ops) yield nothing. Range over the method itself, as in
// `for p, sequential := range req.Paths`: it allocates nothing.
func (r *Request) Paths(yield func(path string, sequential bool) bool) {
	r.paths(yield)
}

// paths yields r's paths, and reports false once yield has.
func (r *Request) paths(yield func(string, bool) bool) bool {
	switch r.Op {
	case OpCreate:
		return yield(r.Path, r.Mode.IsSequential())
	case OpDelete, OpExists, OpGetData, OpSetData, OpGetChildren, OpSync, OpCheck,
		OpGetACL, OpSetACL, OpRemoveWatches, OpAddWatch, OpGetEphemerals, OpGetAllChildrenNumber, OpLocks, OpLockBreak, OpLockHistory, OpShardPartition, OpShardSplit:
		return yield(r.Path, false)
	case OpLeaseRenew:
		return r.Path == "" || yield(r.Path, false) // a node to look at, if named
	case OpMulti:
		for i := range r.Ops {
			if !r.Ops[i].paths(yield) {
				return false
			}
		}
	case OpSetWatches, OpSetWatches2:
		for _, list := range [...][]string{r.DataWatches, r.ExistWatches, r.ChildWatches, r.PersistentWatches, r.RecursiveWatches} {
			for _, p := range list {
				if !yield(p, false) {
					return false
				}
			}
		}
	}
	return true
}
