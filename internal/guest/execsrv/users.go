package execsrv

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// User is who a process runs as.
type User struct {
	Name   string // empty for a uid the passwd file does not know
	UID    uint32
	GID    uint32
	Groups []uint32 // supplementary groups, from the group file
	Home   string
	Shell  string
}

// Users resolves the user of an exec request.
type Users interface {
	// Lookup resolves a user name or uid, optionally followed by
	// ":group" (a group name or gid). A numeric uid absent from the
	// passwd file is allowed; its group is then the same number and its
	// home "/". The error of an unknown name is an ErrUnknownUser.
	Lookup(spec string) (User, error)
}

// ErrUnknownUser is the error for a name the user database does not hold.
var ErrUnknownUser = errors.New("unknown user")

// PasswdFiles resolves users from Root/etc/passwd and Root/etc/group,
// read again on every lookup so users added after boot are found.
type PasswdFiles struct {
	Root string
}

var _ Users = PasswdFiles{}

type passwdEntry struct {
	name        string
	uid, gid    uint32
	home, shell string
}

// Lookup implements Users.
func (p PasswdFiles) Lookup(spec string) (User, error) {
	userPart, groupPart, hasGroup := strings.Cut(spec, ":")
	if userPart == "" || (hasGroup && groupPart == "") {
		return User{}, fmt.Errorf("user %q: want NAME, UID, NAME:GROUP or UID:GID", spec)
	}
	entries, err := p.readPasswd()
	if err != nil {
		return User{}, err
	}
	var u User
	found := false
	num, numErr := parseID(userPart)
	for _, e := range entries {
		if (numErr == nil && e.uid == num) || (numErr != nil && e.name == userPart) {
			u = User{Name: e.name, UID: e.uid, GID: e.gid, Home: e.home, Shell: e.shell}
			found = true
			break
		}
	}
	if !found {
		if numErr != nil {
			return User{}, fmt.Errorf("user %q: %w: not in %s", userPart, ErrUnknownUser, p.path("passwd"))
		}
		u = User{UID: num, GID: num, Home: "/"}
	}
	groups, err := p.readGroup()
	if err != nil {
		return User{}, err
	}
	if hasGroup {
		gid, err := parseID(groupPart)
		if err != nil {
			g, ok := groups.byName[groupPart]
			if !ok {
				return User{}, fmt.Errorf("group %q: %w: not in %s", groupPart, ErrUnknownUser, p.path("group"))
			}
			gid = g
		}
		u.GID = gid
	}
	if u.Name != "" {
		for _, g := range groups.members[u.Name] {
			if g != u.GID {
				u.Groups = append(u.Groups, g)
			}
		}
	}
	if u.Home == "" {
		u.Home = "/"
	}
	return u, nil
}

func parseID(s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	return uint32(n), err
}

func (p PasswdFiles) path(name string) string {
	return filepath.Join(p.Root, "etc", name)
}

// readColon reads the colon-separated lines of an /etc file; a missing
// file is empty.
func (p PasswdFiles) readColon(name string, fields int, each func(f []string)) error {
	f, err := os.Open(p.path(name))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.Split(line, ":")
		if len(parts) < fields {
			continue // malformed lines are skipped, as libc does
		}
		each(parts)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading %s: %w", p.path(name), err)
	}
	return nil
}

func (p PasswdFiles) readPasswd() ([]passwdEntry, error) {
	var out []passwdEntry
	err := p.readColon("passwd", 7, func(f []string) {
		uid, err1 := parseID(f[2])
		gid, err2 := parseID(f[3])
		if err1 != nil || err2 != nil {
			return
		}
		out = append(out, passwdEntry{name: f[0], uid: uid, gid: gid, home: f[5], shell: f[6]})
	})
	return out, err
}

type groupDB struct {
	byName  map[string]uint32
	members map[string][]uint32 // user name → gids listing it
}

func (p PasswdFiles) readGroup() (groupDB, error) {
	db := groupDB{byName: map[string]uint32{}, members: map[string][]uint32{}}
	err := p.readColon("group", 4, func(f []string) {
		gid, err := parseID(f[2])
		if err != nil {
			return
		}
		if _, dup := db.byName[f[0]]; !dup {
			db.byName[f[0]] = gid
		}
		for _, m := range strings.Split(f[3], ",") {
			if m != "" {
				db.members[m] = append(db.members[m], gid)
			}
		}
	})
	return db, err
}
