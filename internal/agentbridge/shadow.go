package agentbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// MaxShadowFile bounds a file copied between the guest and the shadow,
// either way: a larger one is refused.
const MaxShadowFile = 16 << 20

// Guest is what file routing needs of the session's sandbox: a file's
// bytes and writing them, as the sandbox's user (so the guest's own
// permissions apply). Fetch reports a missing file as exists false and
// refuses what is not a regular file (a symbolic link, a FIFO, a
// device) or is larger than max.
type Guest interface {
	Fetch(ctx context.Context, path string, max int) (data []byte, exists bool, err error)
	Push(ctx context.Context, path string, data []byte) error
}

// shadowRel is the name under the shadow directory of guest path g.
func shadowRel(g string) (string, error) {
	rel := strings.TrimPrefix(filepath.Clean(g), "/")
	if !filepath.IsAbs(g) || rel == "" || rel == "." {
		return "", fmt.Errorf("%q is not a guest file path", g)
	}
	return rel, nil
}

func openShadow(shadow string) (*os.Root, error) {
	if err := os.MkdirAll(shadow, 0o700); err != nil {
		return nil, err
	}
	fi, err := os.Lstat(shadow)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("the shadow directory %s is not a directory of mode 0700", shadow)
	}
	return os.OpenRoot(shadow)
}

// WriteShadow makes the shadow copy of guest path g hold data, or not
// exist when exists is false. A copy that already holds data is left as
// it is (its time too: Claude Code refuses to change a file modified
// since it read it). Nothing is followed: the shadow is opened beneath
// its directory with no symbolic link, and one found in the copy's
// place is removed, not written through.
func WriteShadow(shadow, g string, data []byte, exists bool) error {
	rel, err := shadowRel(g)
	if err != nil {
		return err
	}
	root, err := openShadow(shadow)
	if err != nil {
		return err
	}
	defer root.Close()
	fi, err := root.Lstat(rel)
	switch {
	case err == nil && !fi.Mode().IsRegular():
		if err := root.RemoveAll(rel); err != nil {
			return err
		}
	case err == nil && exists:
		if old, err := readBounded(root, rel); err == nil && bytes.Equal(old, data) {
			return nil
		}
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return err
	}
	if !exists {
		if err := root.Remove(rel); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return root.MkdirAll(filepath.Dir(rel), 0o700)
	}
	if err := root.MkdirAll(filepath.Dir(rel), 0o700); err != nil {
		return err
	}
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|noFollow, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ReadShadow returns the shadow copy of guest path g: a regular file of
// at most MaxShadowFile bytes, opened with no symbolic link followed.
func ReadShadow(shadow, g string) ([]byte, error) {
	rel, err := shadowRel(g)
	if err != nil {
		return nil, err
	}
	root, err := openShadow(shadow)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return readBounded(root, rel)
}

func readBounded(root *os.Root, rel string) ([]byte, error) {
	f, err := root.OpenFile(rel, os.O_RDONLY|noFollow|nonBlock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("the shadow copy of %s is not a regular file", rel)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxShadowFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxShadowFile {
		return nil, fmt.Errorf("the shadow copy of /%s is larger than %d bytes", rel, MaxShadowFile)
	}
	return data, nil
}

// DecideFile answers a PreToolUse or PostToolUse hook of a file tool
// (Read, Write, Edit, MultiEdit), routing it by RouteFile:
//
//   - PreToolUse of a host path allows the call with file_path the
//     cleaned absolute path that was checked; of a guest path it copies
//     the guest's file into the shadow (or removes a stale copy) and
//     allows the call with file_path the shadow copy's path.
//   - PostToolUse of a tool that writes, on a shadow copy, copies the
//     copy back into the guest; of a Read of a host path it checks the
//     path again and reports to the model when a symbolic link appeared
//     meanwhile (it detects; it cannot undo).
//
// Every refusal and error blocks the call (exit 2), naming the rule.
func DecideFile(ctx context.Context, in Input, mounts []Mount, shadow string, g Guest) Decision {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(in.ToolInput, &fields); err != nil || fields == nil {
		return Block(fmt.Sprintf("the %s call's input is not a JSON object", in.ToolName))
	}
	var path string
	if json.Unmarshal(fields["file_path"], &path) != nil {
		return Block(fmt.Sprintf("the %s call's input has no file_path string", in.ToolName))
	}
	route, err := RouteFile(in.ToolName, path, in.Cwd, mounts, shadow)
	if err != nil {
		return Block(err.Error())
	}
	writes := fileTools[in.ToolName]
	switch in.HookEventName {
	case "PreToolUse":
		if route.Place == InGuest {
			data, exists, err := g.Fetch(ctx, route.GuestPath, MaxShadowFile)
			if err != nil {
				return Block(fmt.Sprintf("reading %s in the sandbox: %v", route.GuestPath, err))
			}
			if err := WriteShadow(shadow, route.GuestPath, data, exists); err != nil {
				return Block(fmt.Sprintf("copying %s from the sandbox: %v", route.GuestPath, err))
			}
		}
		b, err := json.Marshal(route.HostPath)
		if err != nil {
			return Block(err.Error())
		}
		fields["file_path"] = b
		out, err := json.Marshal(map[string]any{"hookSpecificOutput": map[string]any{
			"hookEventName":            "PreToolUse",
			"permissionDecision":       "allow",
			"permissionDecisionReason": "sbx routes it: " + describe(route),
			"updatedInput":             fields,
		}})
		if err != nil {
			return Block(err.Error())
		}
		return Decision{Stdout: out}
	case "PostToolUse":
		if route.Place == OnHost {
			return Decision{}
		}
		if writes {
			data, err := ReadShadow(shadow, route.GuestPath)
			if err != nil {
				return Block(fmt.Sprintf("the %s of %s was not copied into the sandbox: %v", in.ToolName, route.GuestPath, err))
			}
			if err := g.Push(ctx, route.GuestPath, data); err != nil {
				return Block(fmt.Sprintf("the %s of %s was not copied into the sandbox: %v", in.ToolName, route.GuestPath, err))
			}
		}
		out, err := json.Marshal(map[string]any{"hookSpecificOutput": map[string]any{
			"hookEventName": "PostToolUse",
			"additionalContext": fmt.Sprintf("%s is the sandbox's file; sbx copies it to %s on the host for the file tools. Claude Code checks an Edit's path on the host before any hook, so Edit it as %s (sbx copies the result into the sandbox).",
				route.GuestPath, route.HostPath, route.HostPath),
		}})
		if err != nil {
			return Block(err.Error())
		}
		return Decision{Stdout: out}
	}
	return Decision{}
}

func describe(r FileRoute) string {
	if r.Place == OnHost {
		return "the mounted host file " + r.HostPath
	}
	return "the sandbox's " + r.GuestPath + ", through its copy " + r.HostPath
}
