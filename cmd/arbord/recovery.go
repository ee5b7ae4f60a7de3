package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/arbor-coord/arbor/server"
)

// checkRecovery refuses the recovery flags together, and with --join.
func checkRecovery(restore string, force, join bool, bump uint64) error {
	switch {
	case bump != 0 && restore == "":
		return errors.New("--bump-zxid goes with --restore")
	case restore != "" && force:
		return errors.New("--restore and --force-new-cluster both start a new cluster: give one")
	case restore != "" && join:
		return errors.New("--restore makes a member of a new cluster, which --join would not start: restore every member, or restore one and add the others (arbor member add, then arbord --join)")
	case force && join:
		return errors.New("--force-new-cluster starts a new cluster, which --join would not start")
	}
	return nil
}

// printState prints what the data directory dir of a stopped member holds,
// one name = value per line.
func printState(w io.Writer, dir string) error {
	st, err := server.ReadState(dir)
	if err != nil {
		return err
	}
	ids := func(ids []uint64) string {
		var s []string
		for _, id := range ids {
			s = append(s, fmt.Sprint(id))
		}
		return strings.Join(s, ",")
	}
	var peers []string
	for id, addr := range st.Peers {
		peers = append(peers, fmt.Sprintf("%d=%s", id, addr))
	}
	slices.Sort(peers)
	_, err = fmt.Fprintf(w, "data = %s\nlast_index = %d\nlast_term = %d\ncommit = %d\nterm = %d\nvote = %d\nsnapshot_index = %d\nvoters = %s\nlearners = %s\nlearned_peers = %s\n",
		dir, st.LastIndex, st.LastTerm, st.Commit, st.Term, st.Vote, st.SnapshotIndex, ids(st.Voters), ids(st.Learners), strings.Join(peers, ","))
	return err
}
