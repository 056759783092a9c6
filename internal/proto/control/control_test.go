package control

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// serve answers one request on a fresh connection with handle, which
// gets the verb and body the server read (the body only for Reload).
func serve(t *testing.T, handle func(c net.Conn, verb string, body []byte, err error)) net.Conn {
	t.Helper()
	client, server := net.Pipe()
	t.Cleanup(func() { client.Close(); server.Close() })
	go func() {
		defer server.Close()
		br := bufio.NewReader(server)
		verb, err := ReadVerb(br)
		var body []byte
		if err == nil && verb == Reload {
			body, err = ReadBody(br)
		}
		handle(server, verb, body, err)
	}()
	return client
}

func TestCallRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		req    Request
		answer func(c net.Conn, verb string, body []byte)
		want   string
		refuse string
	}{
		{Request{Verb: Stop}, func(c net.Conn, verb string, _ []byte) {
			if verb == Stop {
				Answer(c, Stopped)
			}
		}, Stopped, ""},
		{Request{Verb: Status}, func(c net.Conn, verb string, _ []byte) { Answer(c, `{"state":"running"}`) }, `{"state":"running"}`, ""},
		{Request{Verb: Reload, Body: []byte(`{"policy":{}}`)}, func(c net.Conn, verb string, body []byte) {
			if verb == Reload && string(body) == `{"policy":{}}` {
				Answer(c, Reloaded)
			} else {
				Refuse(c, errors.New("wrong body"))
			}
		}, Reloaded, ""},
		{Request{Verb: "dance"}, func(c net.Conn, verb string, _ []byte) { Refuse(c, Unknown(verb)) }, "", `unknown request "dance"`},
		{Request{Verb: Stop}, func(c net.Conn, _ string, _ []byte) { Refuse(c, errors.New("the machine\nwould not stop")) }, "", "the machine would not stop"},
	} {
		conn := serve(t, func(c net.Conn, verb string, body []byte, err error) {
			if err != nil {
				t.Errorf("server: %v", err)
				return
			}
			tc.answer(c, verb, body)
		})
		got, err := Call(context.Background(), conn, tc.req)
		var r *Refusal
		switch {
		case tc.refuse != "" && (!errors.As(err, &r) || r.Msg != tc.refuse):
			t.Errorf("%s: Call = %q, %v; want the refusal %q", tc.req.Verb, got, err, tc.refuse)
		case tc.refuse == "" && (err != nil || got != tc.want):
			t.Errorf("%s: Call = %q, %v; want %q", tc.req.Verb, got, err, tc.want)
		}
	}
}

func TestCallNoAnswer(t *testing.T) {
	// The server hangs up without answering.
	conn := serve(t, func(net.Conn, string, []byte, error) {})
	if _, err := Call(context.Background(), conn, Request{Verb: Stop}); !errors.Is(err, ErrNoAnswer) {
		t.Errorf("Call to a server that hangs up = %v; want ErrNoAnswer", err)
	}

	// The server never answers: ctx's deadline ends the call.
	conn = serve(t, func(net.Conn, string, []byte, error) { time.Sleep(time.Minute) })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := Call(ctx, conn, Request{Verb: Status}); !errors.Is(err, ErrNoAnswer) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Call past its deadline = %v; want ErrNoAnswer and the deadline", err)
	}

	// ctx cancelled without a deadline closes the connection.
	conn = serve(t, func(net.Conn, string, []byte, error) { time.Sleep(time.Minute) })
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := Call(ctx, conn, Request{Verb: Stop}); !errors.Is(err, context.Canceled) {
		t.Errorf("Call cancelled = %v; want context.Canceled", err)
	}
}

func TestBounds(t *testing.T) {
	// An answer longer than MaxAnswer is no answer.
	conn := serve(t, func(c net.Conn, _ string, _ []byte, _ error) { Answer(c, strings.Repeat("x", MaxAnswer)) })
	if _, err := Call(context.Background(), conn, Request{Verb: Status}); !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "answer longer than") {
		t.Errorf("Call with an endless answer = %v", err)
	}

	// A request line longer than MaxVerb, or a body longer than
	// MaxBody, is refused by the server's reads.
	for _, tc := range []struct {
		in   string
		body bool
	}{
		{strings.Repeat("s", MaxVerb) + "\n", false},
		{"reload\n" + strings.Repeat("{", MaxBody) + "\n", true},
	} {
		br := bufio.NewReaderSize(strings.NewReader(tc.in), 16)
		verb, err := ReadVerb(br)
		if tc.body {
			if err != nil || verb != Reload {
				t.Fatalf("ReadVerb = %q, %v", verb, err)
			}
			_, err = ReadBody(br)
		}
		if err == nil || !strings.Contains(err.Error(), "request longer than") {
			t.Errorf("reading %d bytes: %v; want a refusal of the length", len(tc.in), err)
		}
	}
	br := bufio.NewReader(strings.NewReader(" status \n"))
	if verb, err := ReadVerb(br); err != nil || verb != Status {
		t.Errorf("ReadVerb = %q, %v", verb, err)
	}
	if _, err := ReadVerb(bufio.NewReader(strings.NewReader("stop"))); err == nil {
		t.Error("ReadVerb took a line without its newline")
	}

	// The client refuses what it could not send as one line each.
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	for _, req := range []Request{{Verb: "stop\nstatus"}, {Verb: Reload, Body: []byte("{}\n{}")}, {Verb: Reload, Body: make([]byte, MaxBody)}} {
		if _, err := Call(context.Background(), client, req); err == nil || errors.Is(err, ErrNoAnswer) {
			t.Errorf("Call(%q) = %v; want it refused before sending", req.Verb, err)
		}
	}
}

// endless is a peer that sends bytes and never a newline; read counts
// what was taken of it.
type endless struct{ read int }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	e.read += len(p)
	return len(p), nil
}

// TestEndlessLine: a request or a body that never ends is refused once
// its bound is passed, having read no more than the bound and one
// buffer, so a peer cannot make a server hold more than that.
func TestEndlessLine(t *testing.T) {
	for _, tc := range []struct {
		what string
		max  int
		read func(*bufio.Reader) error
	}{
		{"request", MaxVerb, func(br *bufio.Reader) error { _, err := ReadVerb(br); return err }},
		{"body", MaxBody, func(br *bufio.Reader) error { _, err := ReadBody(br); return err }},
	} {
		e := &endless{}
		br := bufio.NewReader(e)
		if err := tc.read(br); err == nil || !strings.Contains(err.Error(), "longer than") {
			t.Errorf("%s: %v; want a refusal of the length", tc.what, err)
		}
		if e.read > tc.max+br.Size() {
			t.Errorf("%s: read %d bytes of an endless line, bound %d", tc.what, e.read, tc.max)
		}
	}
}
