// Command raw9p speaks 9P2000.L by hand to a workspace mount's
// virtio-serial port from inside a guest, as hostile root would, and
// prints one line per probe: "NAME ok ..." or "NAME err ...". It is built
// statically by TestWorkspaceMountInVM (vfs_vm_test.go) and copied into
// the guest through the mount itself.
//
// Usage: raw9p PORT-DEVICE
//
// It waits up to 30 s for the port to be free (the guest's relay gives it
// up once the kernel's mount is gone), then: Tversion, Tattach, readdir of
// the root, and Twalk + Tlopen + Tread of a visible file (the control),
// of the hidden files, of ".." and "../.." walks and of names with a
// slash; it plants a symlink and a hard link with Tsymlink and Tlink and
// walks through them. Every message is encoded here, so nothing a client
// library would refuse on its own is left untried.
package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"
)

// 9P2000.L message types.
const (
	tRlerror  = 7
	tTlopen   = 12
	tTsymlink = 16
	tTreaddir = 40
	tTlink    = 70
	tTversion = 100
	tTattach  = 104
	tTwalk    = 110
	tTread    = 116
	tTclunk   = 120
)

const noFid = ^uint32(0)

type client struct {
	f   *os.File
	tag uint16
}

type enc struct{ b []byte }

func (e *enc) u8(v uint8)   { e.b = append(e.b, v) }
func (e *enc) u16(v uint16) { e.b = binary.LittleEndian.AppendUint16(e.b, v) }
func (e *enc) u32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *enc) u64(v uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *enc) str(s string) { e.u16(uint16(len(s))); e.b = append(e.b, s...) }

// rpc sends one message and returns the reply's type and body, skipping
// (a bounded number of) replies to other tags: replies to the kernel's
// last requests may still be in the port when it is reopened.
func (c *client) rpc(typ uint8, body []byte) (uint8, []byte, error) {
	c.tag++
	tag := c.tag
	if typ == tTversion {
		tag = 0xFFFF
	}
	var e enc
	e.u32(uint32(7 + len(body)))
	e.u8(typ)
	e.u16(tag)
	e.b = append(e.b, body...)
	if _, err := c.f.Write(e.b); err != nil {
		return 0, nil, err
	}
	for range 64 {
		var hdr [7]byte
		if _, err := io.ReadFull(c.f, hdr[:]); err != nil {
			return 0, nil, err
		}
		size := binary.LittleEndian.Uint32(hdr[:4])
		if size < 7 || size > 1<<20 {
			return 0, nil, fmt.Errorf("reply of %d bytes", size)
		}
		rest := make([]byte, size-7)
		if _, err := io.ReadFull(c.f, rest); err != nil {
			return 0, nil, err
		}
		if binary.LittleEndian.Uint16(hdr[5:7]) != tag {
			fmt.Printf("note skipped a reply of type %d to tag %d\n", hdr[4], binary.LittleEndian.Uint16(hdr[5:7]))
			continue
		}
		if hdr[4] == tRlerror {
			if len(rest) < 4 {
				return 0, nil, errors.New("short Rlerror")
			}
			return hdr[4], nil, syscall.Errno(binary.LittleEndian.Uint32(rest))
		}
		if hdr[4] != typ+1 {
			return 0, nil, fmt.Errorf("reply type %d to %d", hdr[4], typ)
		}
		return hdr[4], rest, nil
	}
	return 0, nil, errors.New("no reply to our tag among 64")
}

func (c *client) walk(fid, newfid uint32, names ...string) (int, error) {
	var e enc
	e.u32(fid)
	e.u32(newfid)
	e.u16(uint16(len(names)))
	for _, n := range names {
		e.str(n)
	}
	_, r, err := c.rpc(tTwalk, e.b)
	if err != nil {
		return 0, err
	}
	n := int(binary.LittleEndian.Uint16(r))
	if n != len(names) {
		// A partial walk makes no fid.
		return n, fmt.Errorf("walked %d of %d names", n, len(names))
	}
	return n, nil
}

func (c *client) clunk(fid uint32) {
	var e enc
	e.u32(fid)
	c.rpc(tTclunk, e.b)
}

func (c *client) lopen(fid uint32, flags uint32) error {
	var e enc
	e.u32(fid)
	e.u32(flags)
	_, _, err := c.rpc(tTlopen, e.b)
	return err
}

func (c *client) read(fid uint32) ([]byte, error) {
	var e enc
	e.u32(fid)
	e.u64(0)
	e.u32(4096)
	_, r, err := c.rpc(tTread, e.b)
	if err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(r)
	if int(n) > len(r)-4 {
		return nil, errors.New("short Rread")
	}
	return r[4 : 4+n], nil
}

// readdir returns the names in the directory fid opened.
func (c *client) readdir(fid uint32) ([]string, error) {
	var names []string
	var off uint64
	for range 100 {
		var e enc
		e.u32(fid)
		e.u64(off)
		e.u32(8192)
		_, r, err := c.rpc(tTreaddir, e.b)
		if err != nil {
			return names, err
		}
		n := binary.LittleEndian.Uint32(r)
		d := r[4:]
		if int(n) > len(d) {
			return names, errors.New("short Rreaddir")
		}
		d = d[:n]
		if len(d) == 0 {
			return names, nil
		}
		for len(d) > 0 {
			// qid[13] offset[8] type[1] name[s]
			if len(d) < 24 {
				return names, errors.New("bad dirent")
			}
			off = binary.LittleEndian.Uint64(d[13:21])
			l := int(binary.LittleEndian.Uint16(d[22:24]))
			if len(d) < 24+l {
				return names, errors.New("bad dirent name")
			}
			names = append(names, string(d[24:24+l]))
			d = d[24+l:]
		}
	}
	return names, errors.New("listing did not end")
}

// probeRead walks from the root to names, opens and reads what it finds.
func (c *client) probeRead(what string, names ...string) {
	const fid = 50
	if _, err := c.walk(1, fid, names...); err != nil {
		fmt.Printf("%s err walk: %v\n", what, err)
		return
	}
	defer c.clunk(fid)
	if err := c.lopen(fid, uint32(os.O_RDONLY)); err != nil {
		fmt.Printf("%s err lopen: %v\n", what, err)
		return
	}
	b, err := c.read(fid)
	if err != nil {
		fmt.Printf("%s err read: %v\n", what, err)
		return
	}
	fmt.Printf("%s ok %q\n", what, b)
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: raw9p PORT-DEVICE")
		os.Exit(2)
	}
	var f *os.File
	var err error
	start := time.Now()
	for time.Since(start) < 30*time.Second {
		f, err = os.OpenFile(os.Args[1], os.O_RDWR, 0)
		if err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		fmt.Printf("open err %v after %v\n", err, time.Since(start).Round(time.Millisecond))
		os.Exit(1)
	}
	fmt.Printf("open ok after %v\n", time.Since(start).Round(100*time.Millisecond))
	// Bound the whole exchange: a server that stops answering must not
	// hang the test.
	time.AfterFunc(60*time.Second, func() {
		fmt.Println("timeout")
		os.Exit(3)
	})
	c := &client{f: f}

	var e enc
	e.u32(64 << 10)
	e.str("9P2000.L")
	if _, r, err := c.rpc(tTversion, e.b); err != nil {
		fmt.Printf("version err %v\n", err)
		os.Exit(1)
	} else {
		fmt.Printf("version ok %s\n", r[6:])
	}
	e = enc{}
	e.u32(1)
	e.u32(noFid)
	e.str("root")
	e.str("")
	e.u32(0)
	if _, _, err := c.rpc(tTattach, e.b); err != nil {
		fmt.Printf("attach err %v\n", err)
		os.Exit(1)
	}
	fmt.Println("attach ok")

	// The root's listing.
	if _, err := c.walk(1, 2); err != nil {
		fmt.Printf("readdir err clone: %v\n", err)
	} else if err := c.lopen(2, uint32(os.O_RDONLY)); err != nil {
		fmt.Printf("readdir err lopen: %v\n", err)
	} else {
		names, err := c.readdir(2)
		fmt.Printf("readdir %s %q\n", map[bool]string{true: "ok", false: "err"}[err == nil], strings.Join(names, "/"))
		c.clunk(2)
	}

	c.probeRead("control", "README.md")
	c.probeRead("env", ".env")
	c.probeRead("gitconfig", ".git", "config")
	c.probeRead("pem", "keys", "deploy.pem")
	c.probeRead("slashname", ".git/config")
	c.probeRead("dotdot", "..", "..", "etc", "passwd")
	c.probeRead("dotdot-inside", "src", "..", ".env")
	c.probeRead("dotdot-hostname", "..", "etc", "hostname")
	c.probeRead("dot", ".", ".env")
	c.probeRead("empty", "", ".env")

	// ".." at the root must stay at the root (or fail): walk there and
	// read a visible file by its name.
	if _, err := c.walk(1, 3, ".."); err != nil {
		fmt.Printf("rootparent err %v\n", err)
	} else {
		if _, err := c.walk(3, 4, "README.md"); err == nil {
			fmt.Println("rootparent ok README.md is beside it")
			c.clunk(4)
		} else {
			fmt.Printf("rootparent ok but %v\n", err)
		}
		c.clunk(3)
	}

	// Plant links with the protocol: a symlink to the hidden file and to
	// the host's /etc, and a hard link whose target is the root's fid
	// walked to a hidden name (which cannot be had) — so the link's
	// source is the visible README, named as a hidden path.
	if _, err := c.walk(1, 5, "src"); err != nil {
		fmt.Printf("plant err walk src: %v\n", err)
	} else {
		for _, l := range [][2]string{{"l-env", "../.env"}, {"l-etc", "/etc/hostname"}, {"l-up", "../../../../etc/hostname"}, {"l-git", "../.git"}, {"l-root", "/"}} {
			e = enc{}
			e.u32(5)
			e.str(l[0])
			e.str(l[1])
			e.u32(0)
			_, _, err := c.rpc(tTsymlink, e.b)
			fmt.Printf("symlink-%s %v\n", l[0], err)
			c.probeRead("via-"+l[0], "src", l[0])
		}
		// Walks through a planted link to a directory: the server must
		// never resolve a link on the host, whatever the library lets
		// through.
		c.probeRead("through-l-git", "src", "l-git", "config")
		c.probeRead("through-l-root", "src", "l-root", "etc", "hostname")
		if _, err := c.walk(1, 6, "README.md"); err == nil {
			// Tlink: dfid fid name — a new name for README in the root
			// that is hidden must be refused.
			e = enc{}
			e.u32(1)
			e.u32(6)
			e.str(".env")
			_, _, err := c.rpc(tTlink, e.b)
			if err == nil {
				fmt.Println("link-onto-hidden ok")
			} else {
				fmt.Printf("link-onto-hidden err %v\n", err)
			}
			c.clunk(6)
		}
		c.clunk(5)
	}
	fmt.Println("done")
}
