package rootfs

import (
	"archive/tar"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/sbx-dev/sbx/internal/build/layers"
	"github.com/sbx-dev/sbx/internal/diags"
	"github.com/sbx-dev/sbx/internal/proto/imageinfo"
	"github.com/sbx-dev/sbx/lang"
)

// firstGroupID is where gids of supplementary groups that sbx creates
// start (see the package documentation).
const firstGroupID = 1000

// acctFile is one account database (/etc/passwd, /etc/group, /etc/shadow,
// /etc/gshadow) as lines, kept verbatim except where sbx changes them.
type acctFile struct {
	path    string
	lines   []string
	exists  bool
	meta    layers.Entry // the file's entry when it exists
	changed bool
}

// readAcct reads an account database from the tree; a missing one is empty.
func (a *assembler) readAcct(p string) (*acctFile, error) {
	f := &acctFile{path: p}
	e, ok := a.tree.Lookup(p)
	if !ok {
		return f, nil
	}
	if e.Type != tar.TypeReg {
		return nil, fmt.Errorf("%s is a %s in the image, not a file; links in the image are never followed", p, layers.TypeName(e.Type))
	}
	r, err := a.tree.Open(p)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	f.exists, f.meta = true, e
	if s := strings.TrimSuffix(string(b), "\n"); s != "" {
		f.lines = strings.Split(s, "\n")
	}
	return f, nil
}

// record returns the colon-separated fields of line i, or nil for a blank
// line, a comment or a NIS "+"/"-" line.
func (f *acctFile) record(i int) []string {
	l := f.lines[i]
	if l == "" || l[0] == '#' || l[0] == '+' || l[0] == '-' {
		return nil
	}
	return strings.Split(l, ":")
}

// find returns the index of the line whose field n is v, or -1.
func (f *acctFile) find(n int, v string) int {
	for i := range f.lines {
		if r := f.record(i); len(r) > n && r[n] == v {
			return i
		}
	}
	return -1
}

func (f *acctFile) set(i int, fields []string) {
	f.lines[i] = strings.Join(fields, ":")
	f.changed = true
}

func (f *acctFile) add(fields ...string) {
	f.lines = append(f.lines, strings.Join(fields, ":"))
	f.changed = true
}

func (f *acctFile) prepend(fields ...string) {
	f.lines = slices.Insert(f.lines, 0, strings.Join(fields, ":"))
	f.changed = true
}

func (f *acctFile) content() string {
	if len(f.lines) == 0 {
		return ""
	}
	return strings.Join(f.lines, "\n") + "\n"
}

// existingHomes reports which users' home directories the tree holds
// before the artifacts are applied.
func (a *assembler) existingHomes() map[string]bool {
	homes := map[string]bool{}
	for _, u := range a.img.Users {
		_, homes[u.Home] = a.tree.Lookup(u.Home)
	}
	return homes
}

// accounts makes sure root exists, adds the spec's users to the account
// databases, creates their groups and home directories, and returns the
// users as the image description lists them. homes says which homes
// existed before the artifacts were applied.
func (a *assembler) accounts(homes map[string]bool) ([]imageinfo.User, error) {
	var files [4]*acctFile
	for i, p := range []string{"/etc/passwd", "/etc/group", "/etc/shadow", "/etc/gshadow"} {
		f, err := a.readAcct(p)
		if err != nil {
			return nil, fmt.Errorf("image %q: %w", a.img.Name, err)
		}
		files[i] = f
	}
	passwd, group, shadow, gshadow := files[0], files[1], files[2], files[3]

	if passwd.find(0, "root") < 0 {
		passwd.prepend("root", "x", "0", "0", "root", "/root", "/bin/sh")
	}
	if group.find(0, "root") < 0 && group.find(2, "0") < 0 {
		group.prepend("root", "x", "0", "")
	}
	if shadow.find(0, "root") < 0 {
		shadow.prepend("root", "*", "", "0", "99999", "7", "", "", "")
	}
	if gshadow.exists && gshadow.find(0, "root") < 0 && group.find(0, "root") >= 0 {
		gshadow.prepend("root", "*", "", "")
	}

	reserved := map[int]bool{}
	for _, u := range a.img.Users {
		reserved[u.GID] = true
	}
	var users []imageinfo.User
	for _, u := range a.img.Users {
		if err := a.user(u, passwd, group, shadow, gshadow, reserved); err != nil {
			return nil, diags.WithSubject(fmt.Errorf("image %q: user %q: %w", a.img.Name, u.Name, err), u.DeclRange)
		}
		if err := a.home(u, homes[u.Home]); err != nil {
			return nil, diags.WithSubject(fmt.Errorf("image %q: user %q: %w", a.img.Name, u.Name, err), u.DeclRange)
		}
		users = append(users, imageinfo.User{
			Name: u.Name, UID: u.UID, GID: u.GID, Home: u.Home, Shell: u.Shell,
			Groups: slices.Clone(u.Groups),
		})
	}

	shadowGID := -1
	if i := group.find(0, "shadow"); i >= 0 {
		if r := group.record(i); len(r) > 2 {
			if n, err := strconv.Atoi(r[2]); err == nil {
				shadowGID = n
			}
		}
	}
	for _, f := range files {
		if !f.changed {
			continue
		}
		e := f.meta
		if !f.exists {
			e = layers.Entry{Mode: 0o644}
			if f == shadow || f == gshadow {
				e.Mode = 0o600
				if shadowGID >= 0 {
					e.Mode, e.GID = 0o640, shadowGID
				}
			}
		}
		if err := a.put(f.path, f.content(), e.Mode, e.UID, e.GID); err != nil {
			return nil, fmt.Errorf("image %q: %w", a.img.Name, err)
		}
	}
	return users, nil
}

// user adds u to the account databases.
func (a *assembler) user(u *lang.User, passwd, group, shadow, gshadow *acctFile, reserved map[int]bool) error {
	uid, gid := strconv.Itoa(u.UID), strconv.Itoa(u.GID)
	if i := passwd.find(0, u.Name); i >= 0 {
		r := passwd.record(i)
		if len(r) < 7 {
			return fmt.Errorf("/etc/passwd line %d is malformed: %q", i+1, passwd.lines[i])
		}
		if r[2] != uid {
			return fmt.Errorf("the image's /etc/passwd already has %s with uid %s, not %d", u.Name, r[2], u.UID)
		}
		r[3], r[5], r[6] = gid, u.Home, u.Shell
		passwd.set(i, r)
	} else if i := passwd.find(2, uid); i >= 0 {
		return fmt.Errorf("uid %d is already %s's in the image's /etc/passwd", u.UID, passwd.record(i)[0])
	} else {
		passwd.add(u.Name, "x", uid, gid, "", u.Home, u.Shell)
	}
	if shadow.find(0, u.Name) < 0 {
		shadow.add(u.Name, "!", "", "0", "99999", "7", "", "", "")
	}

	// The primary group: any group with the gid will do; otherwise one
	// named after the user.
	if group.find(2, gid) < 0 {
		if i := group.find(0, u.Name); i >= 0 {
			return fmt.Errorf("the image's /etc/group has a group %s with gid %s, but the user's gid is %d and no group has it", u.Name, group.record(i)[2], u.GID)
		}
		group.add(u.Name, "x", gid, "")
		if gshadow.exists {
			gshadow.add(u.Name, "!", "", "")
		}
	}

	for _, g := range u.Groups {
		i := group.find(0, g)
		if i < 0 {
			n := firstGroupID
			for reserved[n] || group.find(2, strconv.Itoa(n)) >= 0 {
				n++
			}
			group.add(g, "x", strconv.Itoa(n), u.Name)
			if gshadow.exists {
				gshadow.add(g, "!", "", u.Name)
			}
			continue
		}
		r := group.record(i)
		if len(r) < 4 {
			return fmt.Errorf("/etc/group line %d is malformed: %q", i+1, group.lines[i])
		}
		if addMember(&r[3], u.Name) {
			group.set(i, r)
		}
		if j := gshadow.find(0, g); j >= 0 {
			if r := gshadow.record(j); len(r) >= 4 && addMember(&r[3], u.Name) {
				gshadow.set(j, r)
			}
		}
	}
	return nil
}

// addMember adds name to a comma-separated member list unless it is
// there, and reports whether it added it.
func addMember(list *string, name string) bool {
	if *list == "" {
		*list = name
		return true
	}
	if slices.Contains(strings.Split(*list, ","), name) {
		return false
	}
	*list += "," + name
	return true
}

// home makes sure u's home directory exists and is u's (see the package
// documentation). inBase says the tree held it before the artifacts.
func (a *assembler) home(u *lang.User, inBase bool) error {
	e, ok := a.tree.Lookup(u.Home)
	switch {
	case ok && e.Type != tar.TypeDir:
		return fmt.Errorf("home %s is a %s in the image, not a directory", u.Home, layers.TypeName(e.Type))
	case ok && inBase:
		return nil
	case ok:
		e.Mode, e.UID, e.GID = 0o700, u.UID, u.GID
		return a.tree.Add(e, nil)
	}
	if err := a.checkParents(u.Home); err != nil {
		return fmt.Errorf("home %w", err)
	}
	return a.tree.Add(layers.Entry{Path: u.Home, Type: tar.TypeDir, Mode: 0o700, UID: u.UID, GID: u.GID}, nil)
}
