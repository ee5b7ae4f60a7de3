//go:build unix

package fence

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive flock on f without waiting. Closing f
// releases it.
func lockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}
