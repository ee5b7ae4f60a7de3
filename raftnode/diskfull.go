package raftnode

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/cockroachdb/pebble/vfs/errorfs"
)

// diskFullFS is the store's file system for fault testing
// (Config.DiskFullFile): while the file marker exists, every operation
// that needs room on the disk fails with ENOSPC, as on a full disk, and
// the others (reads, removals, closes, locks) go through. The marker is
// looked for at each such operation, so a write that begins after the
// marker appears fails, and one that begins after it is gone succeeds.
func diskFullFS(fs vfs.FS, marker string) vfs.FS {
	return reusedFull{errorfs.Wrap(fs, fullDisk(marker, "")), marker}
}

// reusedFull is an errorfs whose recycled files fail too: errorfs's
// ReuseForWrite returns the file unwrapped, and pebble writes its logs to
// recycled files once it has some, which then went on writing on a full
// disk.
type reusedFull struct {
	*errorfs.FS
	marker string
}

func (fs reusedFull) ReuseForWrite(oldname, newname string) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname)
	if err != nil {
		return nil, err
	}
	return errorfs.WrapFile(f, fullDisk(fs.marker, newname)), nil
}

// fullDisk fails the operations that need room while marker exists, with
// the path of the operation, or name for an operation that has none (a
// file wrapped by errorfs.WrapFile).
func fullDisk(marker, name string) errorfs.Injector {
	return errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		if path == "" {
			path = name
		}
		if !needsRoom(op, path) || !exists(marker) {
			return nil
		}
		return &os.PathError{Op: "write", Path: path, Err: syscall.ENOSPC}
	})
}

// needsRoom says whether op on path may need a free block: what fails
// with ENOSPC on a full disk. Creating a file or a directory entry takes a
// block of its directory (making a directory that exists takes none), and
// a sync commits blocks that delayed allocation has not yet found.
func needsRoom(op errorfs.Op, path string) bool {
	switch op {
	case errorfs.OpMkdirAll:
		return !exists(path)
	case errorfs.OpCreate, errorfs.OpLink, errorfs.OpRename, errorfs.OpReuseForRewrite,
		errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFilePreallocate, errorfs.OpFileSync, errorfs.OpFileFlush:
		return true
	}
	return false
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}
