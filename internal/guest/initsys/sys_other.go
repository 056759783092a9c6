//go:build !linux

package initsys

import (
	"errors"
	"os"
)

// Linux returns a Sys whose calls all fail: the guest agent runs only on
// Linux.
func Linux() Sys { return otherSys{} }

var errNotLinux = errors.New("the guest agent runs only on Linux")

type otherSys struct{}

func (otherSys) Mount(source, target, fstype, data string, flags MountFlags) error {
	return errNotLinux
}
func (otherSys) Unmount(target string, detach bool) error   { return errNotLinux }
func (otherSys) LoadModule(f *os.File, params string) error { return errNotLinux }
func (otherSys) SwitchRoot(newRoot string) error            { return errNotLinux }
func (otherSys) Sethostname(name string) error              { return errNotLinux }
func (otherSys) Sync()                                      {}
func (otherSys) PowerOff() error                            { return errNotLinux }
