package guestconn

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/sbx-dev/sbx/internal/proto/agentproto"
)

// ErrNoConfigure is Configure's error for a guest whose hello does not
// announce agentproto.CapConfigure: an agent too old to configure its
// network, trust the host's CA or carry placeholders.
var ErrNoConfigure = errors.New("guestconn: the guest agent does not support configure requests")

// configureSession is the client's end of a configure request.
type configureSession struct {
	c      *Client
	id     uint32
	once   sync.Once
	done   chan struct{}
	result error
}

func (s *configureSession) finish(err error) {
	s.once.Do(func() {
		s.result = err
		close(s.done)
		s.c.remove(s.id)
	})
}

func (s *configureSession) fail(err error) { s.finish(err) }

func (s *configureSession) handle(f agentproto.Frame) error {
	if f.Type != agentproto.TypeResult {
		return nil
	}
	var m agentproto.Result
	if err := agentproto.ParseJSON(f.Type, f.Payload, &m); err != nil {
		return err
	}
	if m.Error != nil {
		s.finish(m.Error)
	} else {
		s.finish(nil)
	}
	return nil
}

func (s *configureSession) cancel() {
	s.c.mu.Lock()
	id := s.id
	s.c.mu.Unlock()
	select {
	case <-s.done:
	default:
		s.c.cancelStream(id)
	}
}

// Configure sends the guest its network, CA and exec defaults (see
// agentproto.Configure) and waits until the guest has applied them. The
// supervisor sends it once it has taken over the agent, before any exec
// of its client's; sent again, it replaces what the earlier one set.
//
// cfg is validated before it is sent (agentproto.Configure.Validate).
// An error the guest reports is returned as an *agentproto.Error; a
// guest that does not support the request gives ErrNoConfigure. When
// ctx ends, Configure returns and the guest is asked to stop, as for
// every call.
func (c *Client) Configure(ctx context.Context, cfg agentproto.Configure) error {
	if !c.hello.Has(agentproto.CapConfigure) {
		return ErrNoConfigure
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("guestconn: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("guestconn: configure: %w", err)
	}
	s := &configureSession{c: c, done: make(chan struct{})}
	defer c.watch(ctx, s.done, "the configure request", s.cancel)()
	if _, err := c.open(s, agentproto.TypeConfigure, &cfg, func(id uint32) { s.id = id }); err != nil {
		s.fail(err)
		return fmt.Errorf("guestconn: configure: %w", err)
	}
	select {
	case <-s.done:
	case <-ctx.Done():
		return fmt.Errorf("guestconn: configure: %w", ctx.Err())
	}
	if errors.Is(s.result, ErrClosed) {
		return fmt.Errorf("guestconn: configure: %w", s.result)
	}
	return s.result
}
