//go:build linux

package netcfg

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/sbx-dev/sbx/internal/proto/agentproto"
	"golang.org/x/sys/unix"
)

// DefaultLinkWait is how long Apply waits for the interface to appear
// when Options.LinkWait is zero: the driver binds it as the agent loads
// virtio_net during boot, so it is normally there already.
const DefaultLinkWait = 10 * time.Second

// replyTimeout bounds each wait for the kernel's answer.
const replyTimeout = 5 * time.Second

// Options adjust Apply.
type Options struct {
	// LinkWait is how long to wait for the interface to appear; zero
	// means DefaultLinkWait.
	LinkWait time.Duration
	// Poll is how often to look for it; zero means 50ms.
	Poll time.Duration
}

// Apply configures the interface nc names in the network namespace of
// the calling thread: the loopback interface up, then the interface up
// with nc's MTU, nc's address as its only address of that family (others
// an earlier Apply set are removed; IPv6 link-local ones stay), and the
// default route of that family through nc's gateway (removed when nc has
// none). Applied twice, the second configuration replaces the first.
func Apply(ctx context.Context, nc agentproto.NetConfig, opts Options) error {
	if err := nc.Validate(); err != nil {
		return err
	}
	p, _ := nc.Prefix()
	p = netip.PrefixFrom(p.Addr(), p.Bits())
	if opts.LinkWait <= 0 {
		opts.LinkWait = DefaultLinkWait
	}
	if opts.Poll <= 0 {
		opts.Poll = 50 * time.Millisecond
	}
	s, err := dial()
	if err != nil {
		return err
	}
	defer s.close()

	lo, err := s.waitLink(ctx, func(l Link) bool { return l.Name == "lo" }, "lo", opts)
	if err != nil {
		return err
	}
	if err := s.do(linkSetMsg(lo.Index, 0)); err != nil {
		return fmt.Errorf("netcfg: bringing lo up: %w", err)
	}

	match := func(l Link) bool { return l.Name == nc.Interface }
	if mac := nc.InterfaceMAC(); mac != nil {
		match = func(l Link) bool { return bytes.Equal(l.MAC, mac) }
	}
	link, err := s.waitLink(ctx, match, nc.Interface, opts)
	if err != nil {
		return err
	}
	if err := s.do(linkSetMsg(link.Index, nc.MTU)); err != nil {
		return fmt.Errorf("netcfg: bringing %s up with MTU %d: %w", link.Name, nc.MTU, err)
	}

	have, err := s.addrs(link.Index, family(p.Addr()))
	if err != nil {
		return err
	}
	for _, old := range have {
		if old != p && !old.Addr().IsLinkLocalUnicast() {
			if err := s.do(addrMsg(rtmDelAddr, link.Index, old)); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
				return fmt.Errorf("netcfg: removing %s from %s: %w", old, link.Name, err)
			}
		}
	}
	if err := s.do(addrMsg(rtmNewAddr, link.Index, p)); err != nil {
		return fmt.Errorf("netcfg: adding %s to %s: %w", p, link.Name, err)
	}

	if nc.Gateway == "" {
		if err := s.do(delDefaultRouteMsg(family(p.Addr()))); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("netcfg: removing the default route: %w", err)
		}
		return nil
	}
	gw := netip.MustParseAddr(nc.Gateway)
	if err := s.do(defaultRouteMsg(link.Index, gw)); err != nil {
		return fmt.Errorf("netcfg: default route via %s on %s: %w", gw, link.Name, err)
	}
	return nil
}

// Link is a network interface as the kernel lists it.
type Link struct {
	Index int32
	Name  string
	MAC   net.HardwareAddr
	Flags uint32
}

// Links lists the network interfaces of the calling thread's network
// namespace.
func Links() ([]Link, error) {
	s, err := dial()
	if err != nil {
		return nil, err
	}
	defer s.close()
	return s.links()
}

// socket is a NETLINK_ROUTE socket. It belongs to the network namespace
// of the thread that opened it, whichever thread uses it later.
type socket struct {
	fd  int
	seq uint32
	buf []byte
}

func dial() (*socket, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netcfg: opening a netlink socket: %w", err)
	}
	tv := unix.NsecToTimeval(replyTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netcfg: netlink socket timeout: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netcfg: binding a netlink socket: %w", err)
	}
	return &socket{fd: fd, seq: uint32(time.Now().UnixNano()), buf: make([]byte, 64<<10)}, nil
}

func (s *socket) close() { unix.Close(s.fd) }

// do sends a request that asks for an acknowledgement and returns the
// kernel's error for it.
func (s *socket) do(m message) error {
	return s.exchange(m, nil)
}

// dump sends a dump request and hands each message of the answer to fn.
func (s *socket) dump(m message, fn func(typ uint16, body []byte)) error {
	return s.exchange(m, fn)
}

// maxReplies bounds the messages read for one request: a kernel's dump
// of a guest's few interfaces is a handful.
const maxReplies = 1 << 16

func (s *socket) exchange(m message, fn func(typ uint16, body []byte)) error {
	s.seq++
	seq := s.seq
	if err := unix.Sendto(s.fd, m.encode(seq), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink send: %w", err)
	}
	for n := 0; n < maxReplies; {
		k, from, err := unix.Recvfrom(s.fd, s.buf, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			if errors.Is(err, unix.EAGAIN) {
				return fmt.Errorf("netlink: no answer from the kernel within %v", replyTimeout)
			}
			return fmt.Errorf("netlink receive: %w", err)
		}
		if sa, ok := from.(*unix.SockaddrNetlink); !ok || sa.Pid != 0 {
			continue // not from the kernel
		}
		b := s.buf[:k]
		for len(b) >= 16 {
			n++
			l := int(binary.NativeEndian.Uint32(b))
			typ := binary.NativeEndian.Uint16(b[4:])
			flags := binary.NativeEndian.Uint16(b[6:])
			mseq := binary.NativeEndian.Uint32(b[8:])
			if l < 16 || l > len(b) {
				return errors.New("netlink: malformed answer from the kernel")
			}
			body := b[16:l]
			b = b[min(align4(l), len(b)):]
			if mseq != seq {
				continue // an answer to an earlier request
			}
			switch typ {
			case nlmsgError:
				if len(body) < 4 {
					return errors.New("netlink: malformed error from the kernel")
				}
				if code := int32(binary.NativeEndian.Uint32(body)); code != 0 {
					return unix.Errno(-code)
				}
				return nil
			case nlmsgDone:
				return nil
			}
			if fn != nil {
				fn(typ, body)
			}
			if flags&flagMulti == 0 && fn != nil {
				return nil
			}
		}
	}
	return errors.New("netlink: the kernel's answer did not end")
}

func (s *socket) links() ([]Link, error) {
	var out []Link
	err := s.dump(linkDumpMsg(), func(typ uint16, body []byte) {
		if typ != rtmNewLink || len(body) < 16 {
			return
		}
		l := Link{
			Index: int32(binary.NativeEndian.Uint32(body[4:])),
			Flags: binary.NativeEndian.Uint32(body[8:]),
		}
		a := attrs(body[16:])
		l.Name = string(bytes.TrimRight(a[iflaIfname], "\x00"))
		if mac := a[iflaAddress]; len(mac) > 0 {
			l.MAC = net.HardwareAddr(bytes.Clone(mac))
		}
		out = append(out, l)
	})
	if err != nil {
		return nil, fmt.Errorf("netcfg: listing links: %w", err)
	}
	return out, nil
}

// waitLink waits for the link match accepts: a driver may still be
// binding the device.
func (s *socket) waitLink(ctx context.Context, match func(Link) bool, what string, opts Options) (Link, error) {
	deadline := time.Now().Add(opts.LinkWait)
	for {
		links, err := s.links()
		if err != nil {
			return Link{}, err
		}
		for _, l := range links {
			if match(l) {
				return l, nil
			}
		}
		if time.Now().After(deadline) {
			var names []string
			for _, l := range links {
				names = append(names, fmt.Sprintf("%s (%v)", l.Name, l.MAC))
			}
			return Link{}, fmt.Errorf("netcfg: no interface %s within %v; there are %v: %w", what, opts.LinkWait, names, os.ErrNotExist)
		}
		select {
		case <-ctx.Done():
			return Link{}, fmt.Errorf("netcfg: waiting for interface %s: %w", what, ctx.Err())
		case <-time.After(opts.Poll):
		}
	}
}

// addrs returns the addresses of a family on link index.
func (s *socket) addrs(index int32, fam uint8) ([]netip.Prefix, error) {
	var out []netip.Prefix
	err := s.dump(addrDumpMsg(fam), func(typ uint16, body []byte) {
		if typ != rtmNewAddr || len(body) < 8 || body[0] != fam || int32(binary.NativeEndian.Uint32(body[4:])) != index {
			return
		}
		a := attrs(body[8:])
		raw := a[ifaLocal]
		if raw == nil {
			raw = a[ifaAddress]
		}
		addr, ok := netip.AddrFromSlice(raw)
		if !ok {
			return
		}
		out = append(out, netip.PrefixFrom(addr, int(body[1])))
	})
	if err != nil {
		return nil, fmt.Errorf("netcfg: listing addresses: %w", err)
	}
	return out, nil
}
