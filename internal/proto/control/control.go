package control

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
)

// Requests.
const (
	Stop   = "stop"
	Status = "status"
	Reload = "reload"
)

// Answers, besides a status and a refusal.
const (
	Stopped  = "stopped"
	Reloaded = "reloaded"
)

// Bounds of the lines, newline included.
const (
	// MaxVerb bounds a request line.
	MaxVerb = 256
	// MaxBody bounds the line that follows a request (reload's JSON):
	// policies are small.
	MaxBody = 4 << 20
	// MaxAnswer bounds an answer line.
	MaxAnswer = 1 << 20
)

// Request is one request: its verb and, for Reload, its body, a line of
// its own (JSON, so without a newline).
type Request struct {
	Verb string
	Body []byte
}

// Refusal is an answer "error: <message>": the server could not do what
// it was asked.
type Refusal struct {
	Msg string
}

func (e *Refusal) Error() string { return e.Msg }

// ErrNoAnswer is wrapped by Call's error when the connection ended, or
// ctx did, before the answer came.
var ErrNoAnswer = errors.New("no answer")

// Call sends req on conn and returns the answer line, without its
// newline. ctx bounds the whole call: when it ends (its deadline
// passes), conn is closed; otherwise Call leaves conn open. An error
// answer is a *Refusal; an answer that never comes wraps ErrNoAnswer
// (and ctx's error when ctx ended first); a failed write is returned as
// it is.
func Call(ctx context.Context, conn net.Conn, req Request) (string, error) {
	if strings.ContainsAny(req.Verb, "\n") || bytes.ContainsAny(req.Body, "\n") {
		return "", errors.New("control: a request line holds a newline")
	}
	if len(req.Body) >= MaxBody {
		return "", fmt.Errorf("control: a %s request of %d bytes, more than the %d a request carries", req.Verb, len(req.Body), MaxBody)
	}
	// ctx's end, its deadline included, closes conn, which ends a
	// blocked write or read; ctx.Err() is set by then.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	msg := append([]byte(req.Verb), '\n')
	if req.Body != nil {
		msg = append(append(msg, req.Body...), '\n')
	}
	if _, err := conn.Write(msg); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return "", err
	}
	line, err := readLine(bufio.NewReader(conn), MaxAnswer, "answer")
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return "", fmt.Errorf("%w: %w", ErrNoAnswer, err)
	}
	answer := strings.TrimSpace(string(line))
	if msg, ok := strings.CutPrefix(answer, "error: "); ok {
		return "", &Refusal{Msg: msg}
	}
	return answer, nil
}

// ReadVerb reads a request line and returns its verb, trimmed of spaces.
func ReadVerb(br *bufio.Reader) (string, error) {
	line, err := readLine(br, MaxVerb, "request")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(line)), nil
}

// ReadBody reads the line that follows a request line.
func ReadBody(br *bufio.Reader) ([]byte, error) {
	return readLine(br, MaxBody, "request")
}

// Answer writes an answer line; answer holds no newline.
func Answer(w io.Writer, answer string) error {
	_, err := io.WriteString(w, answer+"\n")
	return err
}

// Refuse writes an error answer; the newlines of err's message become
// spaces.
func Refuse(w io.Writer, err error) error {
	return Answer(w, "error: "+strings.ReplaceAll(err.Error(), "\n", " "))
}

// Unknown is the refusal of a verb the server does not know.
func Unknown(verb string) error {
	return fmt.Errorf("unknown request %q", verb)
}

// readLine reads one line, what, of at most max bytes, newline
// included, and returns it without its newline.
func readLine(br *bufio.Reader, max int, what string) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > max {
			return nil, fmt.Errorf("%s longer than %d bytes", what, max)
		}
		if err == nil {
			return bytes.TrimSuffix(line, []byte("\n")), nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}
