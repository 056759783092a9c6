package guestconn

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// CheckUser reports a Cmd.User the guest would refuse by its form alone,
// without looking it up: empty means the agent's user; otherwise it is
// NAME, UID, NAME:GROUP or UID:GID, with no empty part and no NUL byte.
// Whether the user exists only the guest can tell.
func CheckUser(user string) error {
	if user == "" {
		return nil
	}
	u, g, hasGroup := strings.Cut(user, ":")
	if u == "" || (hasGroup && g == "") || strings.ContainsRune(user, 0) {
		return fmt.Errorf("user %q: want NAME, UID, NAME:GROUP or UID:GID", user)
	}
	return nil
}

// CheckDir reports a Cmd.Dir that cannot name a guest directory: empty
// means the user's home; otherwise it must be an absolute path (a
// relative one would be resolved against the guest agent's own working
// directory) with no NUL byte. Whether the directory exists only the
// guest can tell.
func CheckDir(dir string) error {
	if dir == "" {
		return nil
	}
	if !path.IsAbs(dir) {
		return fmt.Errorf("working directory %q is not an absolute path", dir)
	}
	if strings.ContainsRune(dir, 0) {
		return fmt.Errorf("working directory %q holds a NUL byte", dir)
	}
	return nil
}

// Check reports what is wrong with c that needs no guest to find out: no
// command, and CheckUser's and CheckDir's errors. Start makes the same
// checks; callers that boot a VM for the command make them first.
func (c Cmd) Check() error {
	if len(c.Args) == 0 || c.Args[0] == "" {
		return errors.New("no command")
	}
	if err := CheckUser(c.User); err != nil {
		return err
	}
	return CheckDir(c.Dir)
}
