package operation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sbx-dev/sbx/internal/machine/consolelog"
)

// FollowFile copies path to w as it grows, until ctx ends or running
// (asked every tenth poll) says the sandbox's supervisor does not run any
// more; then what is left is copied. It starts with at most the last
// consolelog.DefaultMax bytes of the file. When the file is rotated
// (another file now has its name, as package consolelog does to a full
// console log), what was added to the old one is copied and the new one
// followed from its start. A file renamed away with no new one in its
// place (a machine's console kept when it ends) is followed still.
func FollowFile(ctx context.Context, w io.Writer, path string, running func() bool, poll time.Duration) error {
	var f *os.File
	for n := 0; f == nil; n++ {
		var err error
		var fi os.FileInfo
		f, fi, err = consolelog.Open(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if f != nil {
			if off := fi.Size() - consolelog.DefaultMax; off > 0 {
				if _, err := f.Seek(off, io.SeekStart); err != nil {
					f.Close()
					return err
				}
			}
			break
		}
		if n%10 == 0 && !running() {
			return fmt.Errorf("no log at %s, and the sandbox does not run", path)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(poll):
		}
	}
	defer func() { f.Close() }()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for n := 0; ; n++ {
		if _, err := io.Copy(w, f); err != nil {
			return err
		}
		if rotated(f, path) {
			// The old file is complete once its successor exists.
			if _, err := io.Copy(w, f); err != nil {
				return err
			}
			next, _, err := consolelog.Open(path)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			if next != nil {
				f.Close()
				f = next
				continue
			}
		}
		if n%10 == 0 && !running() {
			_, err := io.Copy(w, f)
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// rotated reports whether path now names another file than f.
func rotated(f *os.File, path string) bool {
	now, err := os.Lstat(path)
	if err != nil {
		return false
	}
	cur, err := f.Stat()
	return err == nil && !os.SameFile(cur, now)
}
