package execsrv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"

	"github.com/sbx-dev/sbx/internal/proto/agentproto"
)

var errCanceled = &agentproto.Error{Code: agentproto.CodeCanceled, Message: "canceled by the host"}

// guestPath checks a requested path and returns it joined to the root.
func (s *server) guestPath(op, p string) (string, error) {
	if !path.IsAbs(p) {
		return "", &agentproto.Error{Code: "EINVAL", Message: fmt.Sprintf("%s %q: the path must be absolute", op, p)}
	}
	return filepath.Join(s.opts.Root, filepath.FromSlash(path.Clean(p))), nil
}

// fileError renders an error of a file operation with the guest's path,
// not the root-joined one.
func fileError(op, p string, err error) *agentproto.Error {
	var pe *agentproto.Error
	if errors.As(err, &pe) {
		return pe
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		e := errorOf(errno)
		e.Message = fmt.Sprintf("%s %s: %v", op, p, errno)
		return e
	}
	return &agentproto.Error{Message: fmt.Sprintf("%s %s: %v", op, p, err)}
}

// putSession writes one file.
type putSession struct {
	s   *server
	id  uint32
	req agentproto.FilePut
	in  *agentproto.Inbox
}

func newPutSession(s *server, id uint32, req agentproto.FilePut) *putSession {
	return &putSession{s: s, id: id, req: req, in: agentproto.NewInbox(s.grant(id, agentproto.ChanStdin))}
}

func (p *putSession) handle(f agentproto.Frame) error {
	switch f.Type {
	case agentproto.TypeData:
		ch, data, err := agentproto.ParseData(f.Payload)
		if err != nil || ch != agentproto.ChanStdin {
			return protocolf("stream %d: file data not on channel stdin", f.Stream)
		}
		if err := p.in.Push(data); err != nil {
			return protocolf("stream %d: %v", f.Stream, err)
		}
	case agentproto.TypeEOF:
		p.in.CloseWrite(nil)
	case agentproto.TypeCancel:
		p.in.CloseWrite(errCanceled)
	}
	return nil
}

func (p *putSession) run() {
	stop := context.AfterFunc(p.s.ctx, func() { p.in.CloseWrite(errCanceled) })
	defer stop()
	err := p.put()
	// Whatever the host still sends is dropped, and its credit returned.
	p.in.Abort(errCanceled)
	m := &agentproto.Result{}
	if err != nil {
		m.Error = fileError("put", p.req.Path, err)
		p.s.log.Info("put failed", "stream", p.id, "error", m.Error.Message)
	}
	p.s.conn.WriteJSON(agentproto.TypeResult, p.id, m)
}

func (p *putSession) put() error {
	dest, err := p.s.guestPath("put", p.req.Path)
	if err != nil {
		return err
	}
	if fi, err := os.Lstat(dest); err == nil && fi.IsDir() {
		return syscall.EISDIR
	}
	tmp, err := os.CreateTemp(filepath.Dir(dest), ".sbx-put-*")
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := p.in.WriteTo(tmp); err != nil {
		return err
	}
	if p.req.UID != nil || p.req.GID != nil {
		uid, gid := -1, -1
		if p.req.UID != nil {
			uid = *p.req.UID
		}
		if p.req.GID != nil {
			gid = *p.req.GID
		}
		if err := tmp.Chown(uid, gid); err != nil {
			return err
		}
	}
	mode := fs.FileMode(p.req.Mode)
	if mode == 0 {
		mode = 0o644
	}
	// After chown, which clears set-id bits.
	if err := tmp.Chmod(unixMode(mode)); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), dest); err != nil {
		return err
	}
	ok = true
	return nil
}

// unixMode converts permission and set-id bits given the Unix way (04755)
// to an fs.FileMode.
func unixMode(m fs.FileMode) fs.FileMode {
	out := m & fs.ModePerm
	if m&0o4000 != 0 {
		out |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		out |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		out |= fs.ModeSticky
	}
	return out
}

// getSession sends one file.
type getSession struct {
	s      *server
	id     uint32
	req    agentproto.FileGet
	credit *agentproto.Credit
	ctx    context.Context
	cancel context.CancelFunc
}

func newGetSession(s *server, id uint32, req agentproto.FileGet) *getSession {
	g := &getSession{s: s, id: id, req: req, credit: agentproto.NewCredit()}
	g.ctx, g.cancel = context.WithCancel(s.ctx)
	return g
}

func (g *getSession) handle(f agentproto.Frame) error {
	switch f.Type {
	case agentproto.TypeWindow:
		ch, n, err := agentproto.ParseWindow(f.Payload)
		if err != nil || ch != agentproto.ChanStdout {
			return protocolf("stream %d: window frame not on channel stdout", f.Stream)
		}
		if err := g.credit.Add(n); err != nil {
			return protocolf("stream %d: %v", f.Stream, err)
		}
	case agentproto.TypeCancel:
		g.cancel()
	}
	return nil
}

func (g *getSession) run() {
	defer g.cancel()
	m := &agentproto.Result{}
	if err := g.get(); err != nil {
		if g.ctx.Err() != nil {
			m.Error = errCanceled
		} else {
			m.Error = fileError("get", g.req.Path, err)
		}
		g.s.log.Info("get failed", "stream", g.id, "error", m.Error.Message)
	}
	g.s.conn.WriteJSON(agentproto.TypeResult, g.id, m)
}

func (g *getSession) get() error {
	src, err := g.s.guestPath("get", g.req.Path)
	if err != nil {
		return err
	}
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return syscall.EISDIR
	}
	if !fi.Mode().IsRegular() {
		return &agentproto.Error{Code: "EINVAL", Message: fmt.Sprintf("get %s: not a regular file (%v)", g.req.Path, fi.Mode().Type())}
	}
	info := agentproto.FileInfo{Size: fi.Size(), Mode: uint32(fi.Mode().Perm())}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		info.Mode = st.Mode & 0o7777
		info.UID, info.GID = int(st.Uid), int(st.Gid)
	}
	if err := g.s.conn.WriteJSON(agentproto.TypeFileInfo, g.id, &info); err != nil {
		return err
	}
	buf := make([]byte, agentproto.MaxData)
	for {
		n, err := g.credit.Wait(g.ctx)
		if err != nil {
			return err
		}
		m, rerr := f.Read(buf[:min(n, len(buf))])
		if m > 0 {
			g.credit.Spend(m)
			if err := g.s.conn.WriteData(g.id, agentproto.ChanStdout, buf[:m]); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}
