package guestconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"sync"

	"github.com/sbx-dev/sbx/internal/proto/agentproto"
)

// Owner is who owns a file in the guest.
type Owner struct {
	UID, GID int
}

// FileInfo describes a file got from the guest.
type FileInfo struct {
	Size int64
	Mode fs.FileMode // permission bits, with fs.ModeSetuid, ModeSetgid and ModeSticky
	UID  int
	GID  int
}

// fileSession is the client's end of a put or a get.
type fileSession struct {
	c      *Client
	id     uint32
	credit *agentproto.Credit // put: credit for our data
	in     *agentproto.Inbox  // get: the file's data

	info   chan agentproto.FileInfo
	once   sync.Once
	done   chan struct{}
	result error
}

func newFileSession(c *Client) *fileSession {
	return &fileSession{c: c, info: make(chan agentproto.FileInfo, 1), done: make(chan struct{})}
}

func (s *fileSession) finish(err error) {
	s.once.Do(func() {
		s.result = err
		if s.credit != nil {
			s.credit.Close(errFileDone)
		}
		if s.in != nil {
			s.in.CloseWrite(err)
		}
		close(s.done)
		s.c.remove(s.id)
	})
}

var errFileDone = errors.New("the guest ended the transfer")

func (s *fileSession) fail(err error) { s.finish(err) }

// cancel asks the guest to drop the transfer, once the request that
// opened it is on its way.
func (s *fileSession) cancel() {
	s.c.mu.Lock()
	id := s.id
	s.c.mu.Unlock()
	if id == 0 {
		return
	}
	select {
	case <-s.done:
	default:
		s.c.cancelStream(id)
	}
}

func (s *fileSession) handle(f agentproto.Frame) error {
	switch f.Type {
	case agentproto.TypeWindow:
		ch, n, err := agentproto.ParseWindow(f.Payload)
		if err != nil {
			return err
		}
		if ch == agentproto.ChanStdin && s.credit != nil {
			return s.credit.Add(n)
		}
	case agentproto.TypeFileInfo:
		var m agentproto.FileInfo
		if err := agentproto.ParseJSON(f.Type, f.Payload, &m); err != nil {
			return err
		}
		select {
		case s.info <- m:
		default:
			return errors.New("second file-info frame")
		}
	case agentproto.TypeData:
		ch, data, err := agentproto.ParseData(f.Payload)
		if err != nil {
			return err
		}
		if ch != agentproto.ChanStdout || s.in == nil {
			return fmt.Errorf("file data on %s", ch)
		}
		return s.in.Push(data)
	case agentproto.TypeResult:
		var m agentproto.Result
		if err := agentproto.ParseJSON(f.Type, f.Payload, &m); err != nil {
			return err
		}
		if m.Error != nil {
			s.finish(m.Error)
		} else {
			s.finish(nil)
		}
	}
	return nil
}

// Put writes r's content to dest in the guest, with the permission bits
// of mode (0644 when zero; set-id and sticky bits are kept), owned by
// owner (nil: the agent's user). The guest writes a temporary file beside
// dest and renames it, so dest is replaced whole or not at all. The
// parent directory must exist. Errors from the guest are
// *agentproto.Error, which errors.Is matches against fs.ErrNotExist and
// the like.
func (c *Client) Put(ctx context.Context, r io.Reader, dest string, mode fs.FileMode, owner *Owner) error {
	s := newFileSession(c)
	s.credit = agentproto.NewCredit()
	req := &agentproto.FilePut{Path: dest, Mode: unixMode(mode)}
	if owner != nil {
		req.UID, req.GID = &owner.UID, &owner.GID
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("guestconn: put %s: %w", dest, err)
	}
	defer c.watch(ctx, s.done, "the put of "+strconv.Quote(dest), s.cancel)()
	id, err := c.open(s, agentproto.TypeFilePut, req, func(id uint32) { s.id = id })
	if err != nil {
		s.fail(err)
		return fmt.Errorf("guestconn: put %s: %w", dest, err)
	}
	sendErr := c.sendStream(ctx, id, s.credit, r)
	if sendErr != nil && !errors.Is(sendErr, errFileDone) {
		// Our side failed (ctx, r): the guest drops what it has.
		go s.cancel()
		if ctx.Err() == nil {
			c.expect(s.done, "the put of "+strconv.Quote(dest))
		}
		return fmt.Errorf("guestconn: put %s: %w", dest, sendErr)
	}
	select {
	case <-s.done:
	case <-ctx.Done():
		go s.cancel()
		return fmt.Errorf("guestconn: put %s: %w", dest, ctx.Err())
	}
	if errors.Is(s.result, ErrClosed) {
		return fmt.Errorf("guestconn: put %s: %w", dest, s.result)
	}
	return s.result
}

// Get writes the content of the guest's regular file path to w and
// returns what the guest said about the file. The guest announces the
// file's size before its content: content beyond that size is an error
// as soon as it arrives, before any of it is written to w, and content
// that falls short is an error at the end (so a file that changes size
// while it is sent is an error either way). When ctx ends, Get returns
// at once; the guest is asked to stop and, if it has not CancelGrace
// later, loses the connection.
func (c *Client) Get(ctx context.Context, path string, w io.Writer) (*FileInfo, error) {
	return c.GetFunc(ctx, path, func(*FileInfo) (io.Writer, error) { return w, nil })
}

// GetFunc is Get for a writer that depends on the file: open is called
// once, with what the guest announced (its size and mode), before any
// content arrives, and returns where the content goes. An error from
// open ends the transfer and is returned.
func (c *Client) GetFunc(ctx context.Context, path string, open func(*FileInfo) (io.Writer, error)) (*FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("guestconn: get %s: %w", path, err)
	}
	s := newFileSession(c)
	defer c.watch(ctx, s.done, "the get of "+strconv.Quote(path), s.cancel)()
	_, err := c.open(s, agentproto.TypeFileGet, &agentproto.FileGet{Path: path}, func(id uint32) {
		s.id = id
		s.in = agentproto.NewInbox(c.grant(id, agentproto.ChanStdout))
	})
	if err != nil {
		s.fail(err)
		return nil, fmt.Errorf("guestconn: get %s: %w", path, err)
	}
	abort := context.AfterFunc(ctx, func() { s.in.Abort(ctx.Err()) })
	defer abort()
	var m agentproto.FileInfo
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("guestconn: get %s: %w", path, ctx.Err())
	case m = <-s.info:
	case <-s.done:
		// The info, when there is one, arrived before the end.
		select {
		case m = <-s.info:
			return c.getData(ctx, s, path, open, m)
		default:
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("guestconn: get %s: %w", path, ctx.Err())
		}
		if s.result == nil {
			return nil, fmt.Errorf("guestconn: get %s: the guest sent no file", path)
		}
		if errors.Is(s.result, ErrClosed) {
			return nil, fmt.Errorf("guestconn: get %s: %w", path, s.result)
		}
		return nil, s.result
	}
	return c.getData(ctx, s, path, open, m)
}

// getData receives a file's content once its info arrived.
func (c *Client) getData(ctx context.Context, s *fileSession, path string, open func(*FileInfo) (io.Writer, error), m agentproto.FileInfo) (*FileInfo, error) {
	if m.Size < 0 {
		go s.cancel()
		s.in.Abort(errBadSize)
		return nil, fmt.Errorf("guestconn: get %s: the guest announced a size of %d bytes", path, m.Size)
	}
	info := &FileInfo{Size: m.Size, Mode: fsMode(m.Mode), UID: m.UID, GID: m.GID}
	w, err := open(info)
	if err != nil {
		go s.cancel()
		s.in.Abort(err)
		return nil, fmt.Errorf("guestconn: get %s: %w", path, err)
	}
	sw := &sizedWriter{w: w, left: m.Size}
	n, err := s.in.WriteTo(sw)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("guestconn: get %s: %w", path, ctx.Err())
		}
		var pe *agentproto.Error
		if errors.As(err, &pe) {
			return nil, pe
		}
		// w failed, the guest sent too much, or the connection
		// ended: stop the guest.
		go s.cancel()
		s.in.Abort(err)
		if errors.Is(err, errBadSize) {
			return nil, fmt.Errorf("guestconn: get %s: the guest sent more than the %d bytes it announced (did the file change?)", path, m.Size)
		}
		return nil, fmt.Errorf("guestconn: get %s: %w", path, err)
	}
	<-s.done
	if n != m.Size {
		return nil, fmt.Errorf("guestconn: get %s: got %d bytes, the guest announced %d (did the file change?)", path, n, m.Size)
	}
	return info, nil
}

var errBadSize = errors.New("more data than announced")

// sizedWriter passes at most left bytes on to w; a write that would go
// beyond writes nothing and fails with errBadSize.
type sizedWriter struct {
	w    io.Writer
	left int64
}

func (s *sizedWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > s.left {
		return 0, errBadSize
	}
	n, err := s.w.Write(p)
	s.left -= int64(n)
	return n, err
}

// unixMode converts an fs.FileMode to the Unix bits the protocol carries.
func unixMode(m fs.FileMode) uint32 {
	out := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		out |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		out |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		out |= 0o1000
	}
	return out
}

func fsMode(u uint32) fs.FileMode {
	m := fs.FileMode(u) & fs.ModePerm
	if u&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if u&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if u&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}
