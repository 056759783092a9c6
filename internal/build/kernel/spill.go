package kernel

import (
	"os"
)

// spill holds module bytes Load passed without knowing it needs them, in
// an unnamed temporary file, so that it can take the ones the closure
// needs once the whole archive is read, without a second pass. Memory
// holds only their offsets. A spill that cannot write (no temporary
// directory, a full disk) stops spilling; get then reports the module as
// not spilled, and ReadModules falls back to reading the archive.
type spill struct {
	dir    string
	f      *os.File
	off    int64
	failed bool
	at     map[string][2]int64 // key → offset, length
}

func (s *spill) put(key string, b []byte) {
	if s.failed {
		return
	}
	if s.f == nil {
		f, err := os.CreateTemp(s.dir, "sbx-kernel-modules-*")
		if err != nil {
			s.failed = true
			return
		}
		// The name is not needed: removing it now leaves nothing behind
		// even if the process dies (on systems that allow it).
		_ = os.Remove(f.Name())
		s.f, s.at = f, map[string][2]int64{}
	}
	if _, err := s.f.Write(b); err != nil {
		s.failed = true
		return
	}
	s.at[key] = [2]int64{s.off, int64(len(b))}
	s.off += int64(len(b))
}

// get returns the bytes spilled under key, or nil when there are none.
func (s *spill) get(key string) ([]byte, error) {
	loc, ok := s.at[key]
	if !ok || s.f == nil {
		return nil, nil
	}
	b := make([]byte, loc[1])
	if _, err := s.f.ReadAt(b, loc[0]); err != nil {
		return nil, err
	}
	return b, nil
}

func (s *spill) close() {
	if s.f != nil {
		name := s.f.Name()
		s.f.Close()
		_ = os.Remove(name)
	}
}
