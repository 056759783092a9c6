package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/uuid"
	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/policy"
)

// Path returns the state file's path for the configuration directory dir.
func Path(dir string) string { return filepath.Join(dir, Dir, FileName) }

// Load reads the state of the configuration directory dir from
// dir/.sbx/state.json.
//
// A missing file is not an error: Load returns an empty State with
// FormatVersion set and no lineage (the first Save assigns one). A file of
// another format version is an error naming the file. Malformed JSON,
// unknown fields, an invalid address or a resource whose attributes do
// not match its kind are a *CorruptError, which names the file and says
// how to recover: from the backup of the state before (BackupFileName),
// when it holds one, or by stopping the configuration's sandboxes without
// the state. Resources come back sorted by address with Addr filled in
// from Address.
//
// Load follows no symbolic link below dir: a .sbx that is a link or not a
// directory, and a state.json that is a link or not a regular file, are
// errors naming them, and nothing is read through them.
//
// Load does not take the state lock; read under a Lease (Lease.Load) when
// the state will be saved again.
func Load(dir string) (*State, error) {
	d, err := openDir(dir, false)
	if err != nil {
		return nil, fmt.Errorf("reading state: %w", err)
	}
	if d == nil {
		return &State{FormatVersion: FormatVersion}, nil
	}
	defer d.Close()
	s, _, err := load(d, dir)
	return s, err
}

// load reads the state file in the state directory d of the
// configuration directory dir, and returns it with the file's bytes (nil
// when there is no file).
func load(d *os.Root, dir string) (*State, []byte, error) {
	data, err := readFile(d, FileName)
	if errors.Is(err, fs.ErrNotExist) {
		return &State{FormatVersion: FormatVersion}, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading state: %w", err)
	}
	s, err := parse(data, Path(dir))
	if err != nil {
		var ve *versionError
		if errors.As(err, &ve) {
			return nil, nil, err
		}
		return nil, nil, corrupt(d, dir, err)
	}
	return s, data, nil
}

// CorruptError is the error for a state file that is not a valid state:
// malformed JSON, a missing or unknown field, an invalid resource. Its
// message says how to recover.
type CorruptError struct {
	// Path is the state file, Dir its configuration directory.
	Path, Dir string
	// Err says what is wrong, naming the file (and the line and column
	// where the decoder gives one).
	Err error
	// Backup is the backup file (BackupFileName) when it holds a valid
	// state, BackupSerial that state's serial; Backup is empty when
	// there is no usable backup.
	Backup       string
	BackupSerial uint64
}

func (e *CorruptError) Error() string {
	destroy := fmt.Sprintf("run \"sbx destroy -orphans %s\" to stop this configuration's sandboxes without the state", shellWord(e.Dir))
	if e.Backup != "" {
		return fmt.Sprintf("%v\nThe state as it was before the last save (serial %d) is in %s: copy it back (cp %s %s) to return to it, or %s.",
			e.Err, e.BackupSerial, e.Backup, shellWord(e.Backup), shellWord(e.Path), destroy)
	}
	return fmt.Sprintf("%v\nThere is no valid backup of an earlier state (%s): fix the file, or %s and then remove it.",
		e.Err, filepath.Join(e.Dir, Dir, BackupFileName), destroy)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// corrupt returns the *CorruptError for err, a parse error of the state
// file in the state directory d of dir, with the backup there when it
// holds a valid state. The backup is read as the state file is: no link
// is followed.
func corrupt(d *os.Root, dir string, err error) *CorruptError {
	e := &CorruptError{Path: Path(dir), Dir: dir, Err: err}
	backup := filepath.Join(dir, Dir, BackupFileName)
	if data, err := readFile(d, BackupFileName); err == nil {
		if s, err := parse(data, backup); err == nil {
			e.Backup, e.BackupSerial = backup, s.Serial
		}
	}
	return e
}

// shellWord returns s as one word for a POSIX shell: as it is when it
// holds nothing a shell treats specially, else in single quotes.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+,:@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// versionError is parse's error for a state file of another format
// version: it is not corrupt, and its backup is of that version too.
type versionError struct {
	path    string
	version int
}

func (e *versionError) Error() string {
	return fmt.Sprintf("state file %s has format version %d; this sbx reads version %d (was it written by another version of sbx?)", e.path, e.version, FormatVersion)
}

func parse(data []byte, path string) (*State, error) {
	var head struct {
		FormatVersion *int `json:"format_version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, jsonError(path, data, err)
	}
	switch {
	case head.FormatVersion == nil:
		return nil, fmt.Errorf("state file %s has no format_version; it was not written by sbx", path)
	case *head.FormatVersion != FormatVersion:
		return nil, &versionError{path: path, version: *head.FormatVersion}
	}
	// json.Unmarshal above has already refused trailing data.
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s State
	if err := dec.Decode(&s); err != nil {
		return nil, jsonError(path, data, err)
	}
	if s.Lineage == "" {
		return nil, fmt.Errorf("state file %s has no lineage", path)
	}
	if _, err := uuid.Parse(s.Lineage); err != nil {
		return nil, fmt.Errorf("state file %s: lineage %q is not a UUID", path, s.Lineage)
	}
	res, err := normalize(s.Resources)
	if err != nil {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	s.Resources = res
	if err := checkOutputs(s.Outputs); err != nil {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	return &s, nil
}

// checkOutputs refuses an output without a value or with a name no
// output block can have.
func checkOutputs(outs map[string]*Output) error {
	for name, o := range outs {
		if !addrs.ValidName(name) {
			return fmt.Errorf("output %q: not a valid name", name)
		}
		if o == nil || len(o.Value) == 0 {
			return fmt.Errorf("output %s has no value", name)
		}
	}
	return nil
}

// jsonError turns a decoding error into one naming the file and, where the
// decoder reports an offset, the line and column.
func jsonError(path string, data []byte, err error) error {
	var offset int64 = -1
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		offset = syntax.Offset - 1 // the offending byte was read last
	case errors.As(err, &typ):
		offset = typ.Offset
	}
	if offset < 0 || offset > int64(len(data)) {
		return fmt.Errorf("state file %s is not valid: %w", path, err)
	}
	before := data[:offset]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(offset) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return fmt.Errorf("state file %s:%d:%d is not valid: %w", path, line, col, err)
}

// normalize checks resources and returns copies sorted by address with
// Addr and Address both set. An unset Addr is parsed from Address; when
// both are set they must agree.
func normalize(in []*Resource) ([]*Resource, error) {
	out := make([]*Resource, 0, len(in))
	seen := map[addrs.Ref]bool{}
	for i, r := range in {
		if r == nil {
			return nil, fmt.Errorf("resource %d is null", i)
		}
		c := *r
		switch {
		case c.Addr == addrs.Ref{}:
			a, err := addrs.ParseRef(c.Address)
			if err != nil {
				return nil, fmt.Errorf("resource %d: %v", i, err)
			}
			c.Addr = a
		case c.Address != "" && c.Address != c.Addr.String():
			return nil, fmt.Errorf("resource %d: address %q does not match %s", i, c.Address, c.Addr)
		}
		c.Address = c.Addr.String()
		switch c.Addr.Kind {
		case addrs.Image:
			if c.Image == nil || c.Sandbox != nil {
				return nil, fmt.Errorf("resource %s must have image attributes and no sandbox attributes", c.Addr)
			}
		case addrs.Sandbox:
			if c.Sandbox == nil || c.Image != nil {
				return nil, fmt.Errorf("resource %s must have sandbox attributes and no image attributes", c.Addr)
			}
			if err := checkPolicy(c.Sandbox.Policy); err != nil {
				return nil, fmt.Errorf("resource %s: %v", c.Addr, err)
			}
		default:
			return nil, fmt.Errorf("resource %s: only images and sandboxes are recorded in state", c.Addr)
		}
		if !addrs.ValidName(c.Addr.Name) {
			return nil, fmt.Errorf("resource %s: %q is not a valid name", c.Addr, c.Addr.Name)
		}
		if seen[c.Addr] {
			return nil, fmt.Errorf("resource %s is recorded more than once", c.Addr)
		}
		seen[c.Addr] = true
		out = append(out, &c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr.Less(out[j].Addr) })
	return out, nil
}

// Marshal renders s as the state file's bytes: indented JSON, resources
// sorted by address, map keys sorted, a final newline. Equal states render
// to equal bytes. A zero FormatVersion is written as FormatVersion; any
// other version, a resource whose attributes do not match its kind, and a
// duplicate address are errors. s is not modified.
func Marshal(s *State) ([]byte, error) {
	if s == nil {
		return nil, errors.New("no state to marshal")
	}
	out := *s
	switch out.FormatVersion {
	case 0:
		out.FormatVersion = FormatVersion
	case FormatVersion:
	default:
		return nil, fmt.Errorf("cannot write state format version %d; this sbx writes version %d", out.FormatVersion, FormatVersion)
	}
	res, err := normalize(s.Resources)
	if err != nil {
		return nil, err
	}
	out.Resources = res
	if err := checkOutputs(out.Outputs); err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(&out, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// checkPolicy refuses the rules a state file can hold but no spec can
// write: a host pattern or TCP destination left out (JSON null or a
// missing field, which decoding leaves as the zero value).
func checkPolicy(p policy.Sandbox) error {
	for i, r := range p.Allow {
		if r.Pattern == (policy.HostPattern{}) {
			return fmt.Errorf("allow rule %d has no host pattern", i)
		}
	}
	for i, r := range p.TCP {
		if r.Dest == (policy.HostPort{}) {
			return fmt.Errorf("tcp rule %d has no destination", i)
		}
	}
	for _, b := range p.Secrets {
		for i, h := range b.Hosts {
			if h == (policy.HostPattern{}) {
				return fmt.Errorf("secret %q: host %d is empty", b.Name, i)
			}
		}
	}
	return nil
}
