package tree

import (
	"iter"
	"maps"
	"slices"
)

// pathSet is a session's ephemerals' paths. Most sessions and leases own a
// few (a lease of a lock service, one), which a short slice keeps in a
// tenth of a map's memory; a set grows into a map past fewPaths, so that
// a session of thousands of ephemerals adds and removes each in constant
// time.
type pathSet struct {
	few  []string // in no order; nil once many is in use
	many map[string]struct{}
}

const fewPaths = 8

func (s *pathSet) add(p string) {
	switch {
	case s.many != nil:
		s.many[p] = struct{}{}
	case slices.Contains(s.few, p):
	case len(s.few) < fewPaths:
		s.few = append(s.few, p)
	default:
		s.many = make(map[string]struct{}, 2*fewPaths)
		for _, q := range s.few {
			s.many[q] = struct{}{}
		}
		s.many[p], s.few = struct{}{}, nil
	}
}

func (s *pathSet) remove(p string) {
	if s.many != nil {
		delete(s.many, p)
		return
	}
	if i := slices.Index(s.few, p); i >= 0 {
		last := len(s.few) - 1
		s.few[i], s.few[last] = s.few[last], ""
		s.few = s.few[:last]
	}
}

func (s *pathSet) len() int {
	if s.many != nil {
		return len(s.many)
	}
	return len(s.few)
}

// all yields the paths in no order.
func (s *pathSet) all() iter.Seq[string] {
	if s.many != nil {
		return maps.Keys(s.many)
	}
	return slices.Values(s.few)
}

// sorted returns the paths, sorted, in a slice of the caller's.
func (s *pathSet) sorted() []string { return slices.Sorted(s.all()) }
