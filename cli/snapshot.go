package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/snapfile"
	"github.com/spf13/cobra"
)

// snapshotJSON describes a backup file: what snapshot save and snapshot
// status print.
type snapshotJSON struct {
	File     string       `json:"file"`
	Member   uint64       `json:"member"` // the member that took it
	Zxid     uint64       `json:"zxid"`   // the raft index of the state
	Size     int64        `json:"size"`   // bytes of the state
	Znodes   int64        `json:"znodes"`
	Sessions int64        `json:"sessions"`
	Members  []memberJSON `json:"members"` // the cluster's membership then
	Created  string       `json:"created"` // RFC 3339, by the CLI's clock
	// Shards are a sharded cluster's other groups; the fields above are
	// then the meta group's (Size: the whole state's).
	Shards []snapfile.Shard `json:"shards,omitempty"`
}

func (e *env) snapshotCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Back up a member's state to a file, and check such a file",
		Long: "snapshot save writes a consistent snapshot of the whole state of the member it\n" +
			"reaches (every znode whatever its ACL, the sessions and leases, the lock\n" +
			"history) to a file, while writes go on. It takes the rights to change the\n" +
			"members: a loopback address unless the servers run with --remote-admin, and,\n" +
			"once they have a superuser or client certificates, the superuser (--auth\n" +
			"digest:USER:PASSWORD) or an admin certificate.\n\n" +
			"A new cluster starts from the file with arbord --restore (docs/reliability.md).",
		Example: "  arbor snapshot save backup.arbor\n" +
			"  arbor --servers 127.0.0.1:2282 --auth digest:admin:s3cret snapshot save /backups/arbor-$(date +%F).arbor\n" +
			"  arbor snapshot status backup.arbor",
		Args: usageArgs(cobra.NoArgs), // an unknown subcommand
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(e.snapshotSaveCommand(), e.snapshotStatusCommand())
	return cmd
}

func (e *env) snapshotSaveCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "save FILE",
		Short: "Write a consistent snapshot of a member's state to FILE",
		Long: "Write a snapshot of the whole state of the member reached to FILE: one\n" +
			"consistent state, at one zxid, holding every write acknowledged before the\n" +
			"command began (the member catches up with the leader first). Writes go on\n" +
			"meanwhile; the member's applies wait while it copies its tree aside, as\n" +
			"during its own snapshots. FILE is written whole or not at all (a temporary\n" +
			"file beside it, synced, then renamed), with a checksum of all of it.\n" +
			"Give --servers one member: the snapshot is fetched in chunks from the member\n" +
			"that took it, and the command fails if the connection moves to another.",
		Example: "  arbor snapshot save backup.arbor\n  arbor -o json snapshot save backup.arbor",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.runLong(cmd, func(ctx context.Context, c *client.Client) error {
				out, err := e.saveSnapshot(ctx, c, args[0])
				if errors.Is(err, client.ErrNoAuth) {
					return errors.New("not allowed to take a backup: that takes the superuser (--auth digest:USER:PASSWORD) " +
						"or an admin certificate (--tls-cert), on a loopback address unless the servers run with --remote-admin")
				}
				if err != nil {
					return err
				}
				return e.printSnapshot(out)
			})
		},
	}
}

func (e *env) snapshotStatusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status FILE",
		Short: "Check a backup file and describe it",
		Long: "Read the whole of FILE, check its checksum, and describe the state it holds:\n" +
			"the member it came from, its zxid, size, znodes and sessions, the cluster's\n" +
			"members then and when it was taken. It reaches no server. A file cut short,\n" +
			"changed or of another version is an error.",
		Example: "  arbor snapshot status backup.arbor",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			fi, err := f.Stat()
			if err != nil {
				return err
			}
			h, _, err := snapfile.Read(f, fi.Size())
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			return e.printSnapshot(snapshotOf(args[0], h))
		},
	}
}

// saveSnapshot takes a snapshot through c and writes it to path whole or
// not at all.
func (e *env) saveSnapshot(ctx context.Context, c *client.Client, path string) (snapshotJSON, error) {
	octx, cancel := e.req(ctx)
	snap, err := c.OpenSnapshot(octx)
	cancel()
	if err != nil {
		return snapshotJSON{}, err
	}
	defer func() {
		cctx, cancel := e.req(context.WithoutCancel(ctx))
		defer cancel()
		_ = snap.Close(cctx) // gives it up if it was not fetched whole
	}()
	info := snap.Info()
	h := snapfile.Header{Member: info.Member, Index: uint64(info.Index), Znodes: info.Znodes, Sessions: info.Sessions,
		Size: info.Size, Created: time.Now().UTC().Format(time.RFC3339)}
	for _, m := range info.Members {
		h.Members = append(h.Members, snapfile.Member{ID: uint64(m.ID), Peer: m.Addr, Learner: m.Learner})
	}
	for _, s := range info.Shards {
		h.Shards = append(h.Shards, snapfile.Shard{Group: uint64(s.Group), Index: uint64(s.Index), Znodes: s.Znodes, Size: s.Size})
	}
	err = writeAtomically(path, func(f *os.File) error {
		bw := bufio.NewWriterSize(f, 1<<20)
		w, err := snapfile.NewWriter(bw, h)
		if err != nil {
			return err
		}
		if err := snap.Copy(ctx, w); err != nil {
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
		return bw.Flush()
	})
	if err != nil {
		return snapshotJSON{}, err
	}
	return snapshotOf(path, h), nil
}

// writeAtomically writes path through write into a temporary file in the
// same directory, syncs it and renames it to path: path is then the whole
// new file, or as it was.
func writeAtomically(path string, write func(f *os.File) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := write(f); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func snapshotOf(file string, h snapfile.Header) snapshotJSON {
	out := snapshotJSON{File: file, Member: h.Member, Zxid: h.Index, Size: h.Size, Znodes: h.Znodes, Sessions: h.Sessions,
		Members: []memberJSON{}, Created: h.Created, Shards: h.Shards}
	for _, m := range h.Members {
		role := "voter"
		if m.Learner {
			role = "learner"
		}
		out.Members = append(out.Members, memberJSON{ID: m.ID, Peer: m.Peer, Role: role})
	}
	return out
}

func (e *env) printSnapshot(s snapshotJSON) error {
	if e.json() {
		return e.printJSON(s)
	}
	var members []string
	for _, m := range s.Members {
		members = append(members, fmt.Sprintf("%d=%s (%s)", m.ID, m.Peer, m.Role))
	}
	_, err := fmt.Fprintf(e.stdout, "file = %s\nmember = %d\nzxid = %#x\nsize = %d\nznodes = %d\nsessions = %d\nmembers = %s\ncreated = %s\n",
		s.File, s.Member, s.Zxid, s.Size, s.Znodes, s.Sessions, strings.Join(members, ", "), s.Created)
	for _, sh := range s.Shards {
		if err == nil {
			_, err = fmt.Fprintf(e.stdout, "shard %d = zxid %#x, %d znodes, %d bytes\n", sh.Group, sh.Index, sh.Znodes, sh.Size)
		}
	}
	return err
}
