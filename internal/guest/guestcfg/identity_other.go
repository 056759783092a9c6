//go:build !linux

package guestcfg

import (
	"errors"

	"github.com/sbx-dev/sbx/internal/proto/agentproto"
)

// SetIdentity needs a Linux guest.
func SetIdentity(agentproto.Identity) error {
	return errors.New("guestcfg: setting a guest's identity needs Linux")
}
