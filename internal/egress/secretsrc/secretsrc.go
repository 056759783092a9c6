package secretsrc

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx/internal/egress/sigv4"
	"github.com/sbx-dev/sbx/internal/hostenv"
	"github.com/sbx-dev/sbx/internal/termtext"
)

// Limits.
const (
	// MaxSize bounds a value, and what a file or command may produce.
	MaxSize = 64 << 10
	// DefaultTimeout bounds a command: a credential helper waiting for a
	// login prompt must not hold up a sandbox's start.
	DefaultTimeout = 10 * time.Second

	stderrKept    = 4 << 10
	stderrExcerpt = 200
)

// Options says where a source is resolved.
type Options struct {
	// Dir is the directory relative file paths are read from and
	// commands run in: the spec's directory.
	Dir string
	// Environ is the environment env: sources are read from and commands
	// run with; nil means the process's own.
	Environ []string
	// Timeout bounds a command; zero means DefaultTimeout.
	Timeout time.Duration
	// AWS says the source yields an AWS credential: the JSON `aws
	// configure export-credentials --format process` prints (it may span
	// lines). Resolve returns it on one line (sigv4.Credential.Compact).
	AWS bool
}

// Error is a failure to resolve a source. Its text names the source and
// never contains the value.
type Error struct {
	Source string
	Err    error
}

func (e *Error) Error() string {
	return fmt.Sprintf("secret source %s: %v", termtext.Line(e.Source), e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// ErrEmpty is wrapped by the error for a source whose value is empty.
var ErrEmpty = errors.New("value is empty")

// Resolve returns the value of source:
//
//   - "env:NAME": NAME in opts.Environ (the last of several wins).
//   - "file:PATH": the file's content; PATH is relative to opts.Dir, "~/"
//     is the home directory. The file must be a regular file owned by
//     this user: a checkout is trusted to say where a secret is, not to
//     make the user send someone else's file out.
//   - "command:CMD": what `sh -c CMD`, run in opts.Dir with opts.Environ
//     and no input, prints on standard output, if it exits 0 within
//     opts.Timeout; on timeout its whole process group is killed.
//
// Trailing line breaks are trimmed. An empty value, a value over
// MaxSize and a value holding a NUL or a line break (it is sent in HTTP
// headers) are errors. Errors are *Error and name the source, never the
// value; a failed command's error quotes a short escaped excerpt of its
// standard error.
func Resolve(ctx context.Context, source string, opts Options) ([]byte, error) {
	kind, arg, ok := strings.Cut(source, ":")
	if !ok || arg == "" {
		return nil, &Error{source, errors.New(`want "env:NAME", "file:PATH" or "command:CMD"`)}
	}
	var (
		v   []byte
		err error
	)
	switch kind {
	case "env":
		v, err = fromEnv(arg, opts.Environ)
	case "file":
		v, err = fromFile(arg, opts.Dir)
	case "command":
		v, err = fromCommand(ctx, arg, opts)
	default:
		err = fmt.Errorf("unknown kind %q (want env, file or command)", kind)
	}
	if err == nil {
		v, err = Value(v, opts.AWS)
	}
	if err != nil {
		clear(v)
		return nil, &Error{source, err}
	}
	return v, nil
}

// Value checks a value read from a source sbx does not read itself (a
// Kubernetes Secret) as Resolve checks its own: one trailing line break
// dropped, not empty, within MaxSize, no NUL or line break; with aws, an
// AWS credential's JSON, returned on one line. The error never holds the
// value; on error v is cleared.
func Value(v []byte, aws bool) ([]byte, error) {
	var err error
	if aws {
		var c sigv4.Credential
		c, err = sigv4.ParseCredential(v)
		clear(v)
		if err != nil {
			return nil, err
		}
		v = c.Compact()
	}
	if v, err = check(v); err != nil {
		clear(v)
		return nil, err
	}
	return v, nil
}

func check(v []byte) ([]byte, error) {
	v = bytes.TrimRight(v, "\r\n")
	if len(v) == 0 {
		return nil, ErrEmpty
	}
	if len(v) > MaxSize {
		return nil, fmt.Errorf("value is longer than %d bytes", MaxSize)
	}
	if i := bytes.IndexAny(v, "\x00\r\n"); i >= 0 {
		return nil, fmt.Errorf("value holds a NUL or line break at byte %d (it must fit in an HTTP header)", i)
	}
	return v, nil
}

func fromEnv(name string, environ []string) ([]byte, error) {
	if environ == nil {
		environ = os.Environ()
	}
	val, found := hostenv.Lookup(environ, name)
	if !found {
		return nil, fmt.Errorf("%s is not set", name)
	}
	return []byte(val), nil
}

func fromFile(path, dir string) ([]byte, error) {
	if rest, ok := strings.CutPrefix(path, "~/"); ok {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, err
		}
		path = filepath.Join(home, rest)
	} else if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	// O_NONBLOCK so that a FIFO planted at the path cannot hang the
	// start; it is refused below as not a regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("%s is not owned by this user", path)
	}
	if fi.Size() > MaxSize {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, MaxSize)
	}
	v, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, err
	}
	if len(v) > MaxSize {
		clear(v)
		return nil, fmt.Errorf("%s is larger than %d bytes", path, MaxSize)
	}
	return v, nil
}

// limitedBuffer keeps the first max bytes written to it and counts the
// rest, so a command printing without end cannot grow memory.
type limitedBuffer struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); room < len(p) {
		b.over = true
		b.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.buf.Write(p)
}

func fromCommand(ctx context.Context, command string, opts Options) ([]byte, error) {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Dir = opts.Dir
	cmd.Env = opts.Environ
	cmd.Stdin = nil
	stdout := &limitedBuffer{max: MaxSize + 1}
	stderr := &limitedBuffer{max: stderrKept}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Its own process group, so that on timeout the whole group dies, not
	// only the shell: a child it started would otherwise keep running and
	// keep our pipes open.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	// A process that left the group (setsid) and holds the pipes must not
	// hold Resolve too.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if err != nil && ctx.Err() != nil {
		clear(stdout.buf.Bytes())
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("timed out after %s (the command and its children were killed)", timeout)
		}
		return nil, ctx.Err()
	}
	if err != nil {
		ex := excerpt(stderr.buf.Bytes(), stdout.buf.Bytes())
		clear(stdout.buf.Bytes())
		if ex != "" {
			return nil, fmt.Errorf("%v: %s", err, ex)
		}
		return nil, err
	}
	if stdout.over {
		clear(stdout.buf.Bytes())
		return nil, fmt.Errorf("output is longer than %d bytes", MaxSize)
	}
	return stdout.buf.Bytes(), nil
}

// excerpt returns the start of a failed command's standard error,
// escaped for one line, with anything it printed on standard output
// masked: a helper that prints the value and then fails must not put it
// in an error message.
func excerpt(stderr, stdout []byte) string {
	s := string(bytes.TrimSpace(stderr))
	for line := range strings.SplitSeq(string(stdout), "\n") {
		if line = strings.TrimSpace(line); len(line) >= 4 {
			s = strings.ReplaceAll(s, line, "[redacted]")
		}
	}
	if len(s) > stderrExcerpt {
		s = s[:stderrExcerpt] + "..."
	}
	return termtext.Line(s)
}

// Placeholder returns a fresh random stand-in for the secret called
// name: "sbx_ph_", name reduced to at most 24 of [A-Za-z0-9_], "_" and
// 32 hex digits (128 random bits). It looks like a token, so clients
// that check a key's shape accept it, and it cannot be guessed from the
// guest's side.
func Placeholder(name string) (string, error) {
	var r [16]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	return placeholderPrefix(name) + hex.EncodeToString(r[:]), nil
}

// placeholderPrefix is what every placeholder of the secret called name
// starts with: "sbx_ph_", name reduced, and "_" after a non-empty name.
func placeholderPrefix(name string) string {
	var b strings.Builder
	b.WriteString("sbx_ph_")
	n := 0
	for i := 0; i < len(name) && n < 24; i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' {
			b.WriteByte(c)
		} else {
			b.WriteByte('_')
		}
		n++
	}
	if n > 0 {
		b.WriteByte('_')
	}
	return b.String()
}

// HasPlaceholder reports whether s holds a placeholder Placeholder could
// have made for the secret called name: its prefix followed by 32 hex
// digits, anywhere in s. It needs no particular placeholder, so it
// recognises one of a sandbox's before the sandbox has made them.
func HasPlaceholder(s, name string) bool {
	prefix := placeholderPrefix(name)
	for {
		i := strings.Index(s, prefix)
		if i < 0 {
			return false
		}
		s = s[i+len(prefix):]
		if len(s) >= 32 && isHex(s[:32]) {
			return true
		}
	}
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
