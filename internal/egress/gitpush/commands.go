package gitpush

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Command is one ref update of a push. Old and New are hex object ids;
// an id of zeros in Old creates Ref, in New deletes it.
type Command struct{ Old, New, Ref string }

// IsCreate reports whether c creates its ref.
func (c Command) IsCreate() bool { return isZeroID(c.Old) }

// IsDelete reports whether c deletes its ref.
func (c Command) IsDelete() bool { return isZeroID(c.New) }

func isZeroID(id string) bool { return strings.Trim(id, "0") == "" }

// maxPktLen is the largest pkt-line git writes or accepts, its four
// length digits included.
const maxPktLen = 65520

// ParseCommands reads the ref-update commands at the start of a
// git-receive-pack request body: optional "shallow" lines, then one
// pkt-line per command up to the flush-pkt, the first carrying the
// client's capabilities after a NUL. It reads exactly the bytes it
// returns in consumed and no more, at most limit of them, so the caller
// can send consumed upstream and then copy the rest of r (the pack).
// Malformed pkt-lines, ids that are not hex of SHA-1 or SHA-256 length,
// invalid ref names, a command list longer than limit and a signed push
// (push-cert, which this does not read) are errors.
func ParseCommands(r io.Reader, limit int) (cmds []Command, consumed []byte, caps []string, err error) {
	var hdr [4]byte
	for first := true; ; {
		if len(consumed)+4 > limit {
			return nil, consumed, nil, fmt.Errorf("push commands longer than %d bytes", limit)
		}
		if got, err := io.ReadFull(r, hdr[:]); err != nil {
			return nil, append(consumed, hdr[:got]...), nil, fmt.Errorf("reading push commands: %w", noEOF(err))
		}
		consumed = append(consumed, hdr[:]...)
		n, err := strconv.ParseUint(string(hdr[:]), 16, 16)
		if err != nil || hdr[0] == '+' || hdr[0] == '-' {
			return nil, consumed, nil, fmt.Errorf("malformed pkt-line length %q", hdr[:])
		}
		if n == 0 {
			if len(cmds) == 0 {
				return nil, consumed, nil, errors.New("push with no commands")
			}
			return cmds, consumed, caps, nil
		}
		if n <= 4 || n > maxPktLen {
			return nil, consumed, nil, fmt.Errorf("unexpected pkt-line length %d in push commands", n)
		}
		if len(consumed)+int(n)-4 > limit {
			return nil, consumed, nil, fmt.Errorf("push commands longer than %d bytes", limit)
		}
		start := len(consumed)
		consumed = append(consumed, make([]byte, n-4)...)
		if got, err := io.ReadFull(r, consumed[start:]); err != nil {
			return nil, consumed[:start+got], nil, fmt.Errorf("reading push commands: %w", noEOF(err))
		}
		line := consumed[start:]
		line = bytes.TrimSuffix(line, []byte("\n"))
		if len(cmds) == 0 && bytes.HasPrefix(line, []byte("shallow ")) {
			if !validID(string(line[len("shallow "):])) {
				return nil, consumed, nil, errors.New("malformed shallow line in push")
			}
			continue
		}
		if first {
			first = false
			if i := bytes.IndexByte(line, 0); i >= 0 {
				caps = strings.Fields(string(line[i+1:]))
				line = line[:i]
			}
			if bytes.HasPrefix(line, []byte("push-cert")) {
				return nil, consumed, nil, errors.New("signed pushes (push-cert) are not supported")
			}
		}
		c, err := parseCommand(line)
		if err != nil {
			return nil, consumed, nil, err
		}
		cmds = append(cmds, c)
	}
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func parseCommand(line []byte) (Command, error) {
	parts := strings.Split(string(line), " ")
	if len(parts) != 3 {
		return Command{}, fmt.Errorf("malformed push command %q", truncate(string(line)))
	}
	c := Command{Old: parts[0], New: parts[1], Ref: parts[2]}
	if !validID(c.Old) || !validID(c.New) || len(c.Old) != len(c.New) {
		return Command{}, fmt.Errorf("malformed object id in push command %q", truncate(string(line)))
	}
	if isZeroID(c.Old) && isZeroID(c.New) {
		return Command{}, fmt.Errorf("push command with two zero ids for %q", truncate(c.Ref))
	}
	if !validRef(c.Ref) {
		return Command{}, fmt.Errorf("invalid ref name %q in push", truncate(c.Ref))
	}
	return c, nil
}

func truncate(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// validID accepts a lower-case hex SHA-1 or SHA-256 object id.
func validID(id string) bool {
	if len(id) != 40 && len(id) != 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// validRef applies git's check-ref-format rules, stricter where that
// costs nothing: the name is matched against patterns, so it must have
// one spelling only (no "..", empty or dot-led components).
func validRef(ref string) bool {
	if !strings.HasPrefix(ref, "refs/") || len(ref) > 1024 {
		return false
	}
	if strings.HasSuffix(ref, "/") || strings.HasSuffix(ref, ".") || strings.Contains(ref, "..") || strings.Contains(ref, "@{") {
		return false
	}
	for i := 0; i < len(ref); i++ {
		c := ref[i]
		if c < 0x20 || c == 0x7f || strings.IndexByte(" ~^:?*[\\", c) >= 0 {
			return false
		}
	}
	for comp := range strings.SplitSeq(ref, "/") {
		if comp == "" || comp[0] == '.' || strings.HasSuffix(comp, ".lock") {
			return false
		}
	}
	return true
}
