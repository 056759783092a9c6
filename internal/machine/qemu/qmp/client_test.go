//go:build unix

package qmp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/socketpair"
)

// These tests run the client against a scripted peer over a socketpair.
// The peer is not QEMU: it plays the documented QMP wire protocol
// (docs/interop/qmp-spec in QEMU) to produce what a real QEMU produces
// only rarely or never on demand — error replies, events between a
// command and its reply, replies without an id, a reply split across
// writes, a peer that never answers. qemu_test.go runs the same client
// against a real QEMU.

const greeting = `{"QMP": {"version": {"qemu": {"micro": 22, "minor": 2, "major": 7}, "package": "Debian 1:7.2"}, "capabilities": ["oob"]}}` + "\n"

// peer is the scripted QMP side of a socketpair.
type peer struct {
	t    *testing.T
	conn net.Conn
	dec  *json.Decoder
}

type cmd struct {
	Execute   string          `json:"execute"`
	Arguments json.RawMessage `json:"arguments"`
	ID        json.RawMessage `json:"id"`
}

// next reads the next command the client sent.
func (p *peer) next() cmd {
	var c cmd
	if err := p.dec.Decode(&c); err != nil {
		p.t.Errorf("peer: reading a command: %v", err)
	}
	return c
}

func (p *peer) send(s string) {
	if _, err := p.conn.Write([]byte(s)); err != nil {
		p.t.Errorf("peer: writing: %v", err)
	}
}

// ret sends a reply to c with the return value ret (JSON).
func (p *peer) ret(c cmd, ret string) {
	p.send(fmt.Sprintf(`{"return": %s, "id": %s}`+"\n", ret, c.ID))
}

// connect makes a client over a socketpair whose peer has greeted and
// accepted qmp_capabilities.
func connect(t *testing.T) (*Client, *peer) {
	t.Helper()
	a, b := socketpair.New(t)
	p := &peer{t: t, conn: b, dec: json.NewDecoder(b)}
	go func() {
		p.send(greeting)
		c := p.next()
		if c.Execute != "qmp_capabilities" {
			t.Errorf("first command is %q, want qmp_capabilities", c.Execute)
		}
		p.ret(c, "{}")
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := NewClient(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, p
}

func TestGreeting(t *testing.T) {
	c, _ := connect(t)
	g := c.Greeting()
	if g.Version.String() != "7.2.22" || g.Version.Package != "Debian 1:7.2" || len(g.Capabilities) != 1 || g.Capabilities[0] != "oob" {
		t.Errorf("greeting = %+v", g)
	}
}

func TestErrorReply(t *testing.T) {
	c, p := connect(t)
	go func() {
		x := p.next()
		p.send(fmt.Sprintf(`{"error": {"class": "DeviceNotFound", "desc": "Device 'nope' not found"}, "id": %s}`+"\n", x.ID))
	}()
	err := c.Execute(context.Background(), "device_del", map[string]string{"id": "nope"}, nil)
	var qe *Error
	if !errors.As(err, &qe) {
		t.Fatalf("err = %v (%T), want *Error", err, err)
	}
	if qe.Command != "device_del" || qe.Class != "DeviceNotFound" || qe.Desc != "Device 'nope' not found" {
		t.Errorf("error = %+v", qe)
	}
	if got, want := err.Error(), "qmp: device_del: DeviceNotFound: Device 'nope' not found"; got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
}

func TestArgumentsAreSent(t *testing.T) {
	c, p := connect(t)
	got := make(chan cmd, 1)
	go func() {
		x := p.next()
		got <- x
		p.ret(x, `{"status": "running", "running": true}`)
	}()
	var st struct {
		Status  string `json:"status"`
		Running bool   `json:"running"`
	}
	if err := c.Execute(context.Background(), "human-monitor-command", map[string]string{"command-line": "info status"}, &st); err != nil {
		t.Fatal(err)
	}
	if st.Status != "running" || !st.Running {
		t.Errorf("result = %+v", st)
	}
	x := <-got
	if x.Execute != "human-monitor-command" || string(x.Arguments) != `{"command-line":"info status"}` {
		t.Errorf("sent %s %s", x.Execute, x.Arguments)
	}
	// Without arguments the member is left out.
	go func() {
		x := p.next()
		got <- x
		p.ret(x, `{}`)
	}()
	if err := c.Execute(context.Background(), "stop", nil, nil); err != nil {
		t.Fatal(err)
	}
	if x := <-got; x.Arguments != nil {
		t.Errorf("stop sent arguments %s", x.Arguments)
	}
}

// Events arriving between a command and its reply go to Events, in
// order, and the reply still reaches its caller.
func TestInterleavedEvents(t *testing.T) {
	c, p := connect(t)
	go func() {
		x := p.next()
		p.send(`{"event": "STOP", "timestamp": {"seconds": 1700000000, "microseconds": 250000}}` + "\n" +
			`{"event": "BLOCK_JOB_READY", "data": {"device": "root"}, "timestamp": {"seconds": 1700000001, "microseconds": 0}}` + "\n")
		p.ret(x, `{}`)
		p.send(`{"event": "RESUME", "timestamp": {"seconds": 1700000002, "microseconds": 0}}` + "\n")
	}()
	if err := c.Execute(context.Background(), "stop", nil, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"STOP", "BLOCK_JOB_READY", "RESUME"}
	for i, name := range want {
		select {
		case ev := <-c.Events():
			if ev.Name != name {
				t.Errorf("event %d = %s, want %s", i, ev.Name, name)
			}
			if i == 0 && !ev.Time.Equal(time.Unix(1700000000, 250000000)) {
				t.Errorf("STOP time = %v", ev.Time)
			}
			if i == 1 && string(ev.Data) != `{"device": "root"}` {
				t.Errorf("BLOCK_JOB_READY data = %s", ev.Data)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("event %s did not arrive", name)
		}
	}
}

// Replies are matched to callers by id, not by order.
func TestConcurrentRepliesMatchedByID(t *testing.T) {
	c, p := connect(t)
	const n = 20
	go func() {
		var cmds []cmd
		for range n {
			cmds = append(cmds, p.next())
		}
		// Answer in reverse order; each reply echoes its command's
		// argument, so a mix-up shows.
		for i := len(cmds) - 1; i >= 0; i-- {
			p.ret(cmds[i], string(cmds[i].Arguments))
		}
	}()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var got struct{ N int }
			if err := c.Execute(context.Background(), "echo", struct{ N int }{i}, &got); err != nil {
				t.Error(err)
				return
			}
			if got.N != i {
				t.Errorf("call %d got the reply to call %d", i, got.N)
			}
		})
	}
	wg.Wait()
}

// QEMU answers a command it cannot parse without an id; the reply goes to
// the oldest caller.
func TestReplyWithoutID(t *testing.T) {
	c, p := connect(t)
	go func() {
		p.next()
		p.send(`{"error": {"class": "GenericError", "desc": "JSON parse error, invalid keyword 'x'"}}` + "\n")
	}()
	err := c.Execute(context.Background(), "x", nil, nil)
	var qe *Error
	if !errors.As(err, &qe) || qe.Class != "GenericError" {
		t.Fatalf("err = %v, want a GenericError", err)
	}
}

// A reply larger than any fixed buffer, written in small pieces, decodes.
func TestLargeReplyInPieces(t *testing.T) {
	c, p := connect(t)
	const n = 20000 // about 1 MiB of JSON
	go func() {
		x := p.next()
		var b strings.Builder
		b.WriteString(`{"return": [`)
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, `{"name": "type-%d", "meta-type": "object", "members": [{"name": "padding-padding-padding", "type": "str"}]}`, i)
		}
		fmt.Fprintf(&b, `], "id": %s}`+"\n", x.ID)
		s := b.String()
		for len(s) > 0 {
			k := min(len(s), 4093)
			p.send(s[:k])
			s = s[k:]
		}
	}()
	var got []struct {
		Name string `json:"name"`
	}
	if err := c.Execute(context.Background(), "query-qmp-schema", nil, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != n || got[n-1].Name != fmt.Sprintf("type-%d", n-1) {
		t.Errorf("decoded %d entries, last %+v", len(got), got[len(got)-1])
	}
}

// A caller whose context ends stops waiting; the late reply is dropped
// and the next command gets its own reply.
func TestContextDeadline(t *testing.T) {
	c, p := connect(t)
	first := make(chan cmd, 1)
	go func() { first <- p.next() }()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.Execute(ctx, "slow", nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a deadline error", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("Execute returned after %v", d)
	}
	slow := <-first
	go func() {
		next := p.next()
		p.ret(slow, `"late"`)
		p.ret(next, `"mine"`)
	}()
	var got string
	if err := c.Execute(context.Background(), "fast", nil, &got); err != nil {
		t.Fatal(err)
	}
	if got != "mine" {
		t.Errorf("second call got %q", got)
	}
}

// When the peer goes away, waiting and later calls fail with ErrClosed,
// events queued before the end are still delivered, then Events closes.
func TestPeerCloses(t *testing.T) {
	c, p := connect(t)
	go func() {
		p.next()
		p.send(`{"event": "SHUTDOWN", "data": {"guest": false, "reason": "host-qmp-quit"}, "timestamp": {"seconds": 1, "microseconds": 2}}` + "\n")
		p.conn.Close()
	}()
	err := c.Execute(context.Background(), "quit", nil, nil)
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("err = %v, want ErrClosed", err)
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed")
	}
	ev, ok := <-c.Events()
	if !ok || ev.Name != "SHUTDOWN" {
		t.Fatalf("event = %+v, %v; want SHUTDOWN", ev, ok)
	}
	if _, ok := <-c.Events(); ok {
		t.Error("Events not closed after the last event")
	}
	if err := c.Execute(context.Background(), "query-status", nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("after the end: err = %v, want ErrClosed", err)
	}
}

func TestCloseUnblocksCallers(t *testing.T) {
	c, p := connect(t)
	go p.next()
	errc := make(chan error, 1)
	go func() { errc <- c.Execute(context.Background(), "never-answered", nil, nil) }()
	time.Sleep(50 * time.Millisecond)
	c.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("err = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not unblock Execute")
	}
	if _, ok := <-c.Events(); ok {
		t.Error("Events open after Close")
	}
}

// Events nobody reads are bounded; commands keep working.
func TestUnreadEventsAreBounded(t *testing.T) {
	c, p := connect(t)
	go func() {
		x := p.next()
		var b strings.Builder
		for i := range MaxQueuedEvents + 10 {
			fmt.Fprintf(&b, `{"event": "RTC_CHANGE", "data": {"offset": %d}, "timestamp": {"seconds": 1, "microseconds": 0}}`+"\n", i)
		}
		p.send(b.String())
		p.ret(x, `{}`)
	}()
	if err := c.Execute(context.Background(), "query-status", nil, nil); err != nil {
		t.Fatal(err)
	}
	// The forwarder holds one event in hand, so 9 or 10 are dropped.
	if d := c.DroppedEvents(); d < 9 || d > 10 {
		t.Errorf("dropped %d events, want 9 or 10", d)
	}
}

func TestBadGreeting(t *testing.T) {
	for name, first := range map[string]string{
		"not a greeting": `{"return": {}}` + "\n",
		"not JSON":       "hello\n",
	} {
		t.Run(name, func(t *testing.T) {
			a, b := socketpair.New(t)
			go b.Write([]byte(first))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if c, err := NewClient(ctx, a); err == nil {
				c.Close()
				t.Fatal("NewClient accepted a peer that sent no greeting")
			}
		})
	}
}

func TestGreetingTimeout(t *testing.T) {
	a, _ := socketpair.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := NewClient(ctx, a)
	if err == nil {
		t.Fatal("NewClient succeeded with a silent peer")
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("NewClient returned after %v", d)
	}
}

func TestCapabilitiesRefused(t *testing.T) {
	a, b := socketpair.New(t)
	p := &peer{t: t, conn: b, dec: json.NewDecoder(b)}
	go func() {
		p.send(greeting)
		x := p.next()
		p.send(fmt.Sprintf(`{"error": {"class": "CommandNotFound", "desc": "Capabilities negotiation is already complete, command ignored"}, "id": %s}`+"\n", x.ID))
	}()
	_, err := NewClient(context.Background(), a)
	var qe *Error
	if !errors.As(err, &qe) || qe.Class != "CommandNotFound" {
		t.Fatalf("err = %v, want the CommandNotFound reply", err)
	}
}
