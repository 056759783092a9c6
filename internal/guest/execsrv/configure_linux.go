package execsrv

import (
	"context"
	"fmt"

	"github.com/sbx-dev/sbx/internal/proto/agentproto"
)

// configureSession applies one configure request.
type configureSession struct {
	s       *server
	id      uint32
	payload []byte
	ctx     context.Context
	cancel  context.CancelFunc
}

func newConfigureSession(s *server, id uint32, payload []byte) *configureSession {
	c := &configureSession{s: s, id: id, payload: payload}
	c.ctx, c.cancel = context.WithCancel(s.ctx)
	return c
}

func (c *configureSession) handle(f agentproto.Frame) error {
	if f.Type == agentproto.TypeCancel {
		c.cancel()
	}
	return nil
}

func (c *configureSession) run() {
	defer c.cancel()
	m := &agentproto.Result{}
	if err := c.configure(); err != nil {
		m.Error = errorOf(err)
		c.s.log.Info("configure failed", "stream", c.id, "error", err)
	}
	c.s.conn.WriteJSON(agentproto.TypeResult, c.id, m)
}

func (c *configureSession) configure() error {
	if c.s.opts.Configurer == nil {
		return &agentproto.Error{Code: agentproto.CodeUnsupported, Message: "configure: this agent was started without a configurer"}
	}
	var req agentproto.Configure
	if err := agentproto.ParseJSON(agentproto.TypeConfigure, c.payload, &req); err != nil {
		return &agentproto.Error{Code: agentproto.CodeProtocol, Message: err.Error()}
	}
	if err := req.Validate(); err != nil {
		return &agentproto.Error{Code: agentproto.CodeProtocol, Message: err.Error()}
	}
	if err := c.s.opts.Configurer.Configure(c.ctx, req); err != nil {
		if c.ctx.Err() != nil {
			return &agentproto.Error{Code: agentproto.CodeCanceled, Message: fmt.Sprintf("configure canceled: %v", err)}
		}
		return err
	}
	return nil
}
