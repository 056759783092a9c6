package command

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// againstDir returns the directory holding the configuration a plan is
// compared with. If rev names an existing directory, that is it. Otherwise
// rev is a git revision of the repository holding dir: the configuration's
// directory at that revision is extracted with git archive into a new
// temporary directory, which cleanup removes. If the directory did not
// exist at that revision, other is empty: the configuration is new. label
// names the other side in the plan.
//
// A name that is both a directory and a revision of the repository holding
// dir is an error: the checkout under review may hold a directory named
// like the revision it is reviewed against ("main", "origin/main", "HEAD")
// with a copy of its own configuration in it, which would make the plan
// compare the change with itself.
func againstDir(ctx context.Context, env *Env, dir, rev string) (other, label string, cleanup func(), err error) {
	cleanup = func() {}
	if info, statErr := os.Stat(rev); statErr == nil && info.IsDir() {
		if !strings.HasPrefix(rev, "-") && isRevision(ctx, env, dir, rev) {
			return "", "", cleanup, fmt.Errorf("-against %s is ambiguous: it is both a directory and a git revision of the repository holding %s; write ./%s (or an absolute path) for the directory, or the revision's full name (refs/heads/…, refs/remotes/…, a commit id) for the revision", rev, dir, filepath.Clean(rev))
		}
		return rev, rev, cleanup, nil
	}
	if strings.HasPrefix(rev, "-") {
		return "", "", cleanup, fmt.Errorf("-against %q is neither a directory nor a git revision", rev)
	}
	top, err := git(ctx, env, dir, nil, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", "", cleanup, fmt.Errorf("-against %s: %s is not a directory, and %s is not in a git repository to read it as a revision from: %v", rev, rev, dir, err)
	}
	top = strings.TrimSpace(top)
	prefix, err := git(ctx, env, dir, nil, "rev-parse", "--show-prefix")
	if err != nil {
		return "", "", cleanup, fmt.Errorf("-against %s: %v", rev, err)
	}
	prefix = strings.TrimSuffix(strings.TrimSpace(prefix), "/")
	if _, err := git(ctx, env, top, nil, "rev-parse", "--verify", "--quiet", rev+"^{commit}"); err != nil {
		return "", "", cleanup, fmt.Errorf("-against %s: not a directory, and not a revision of the git repository at %s", rev, top)
	}
	treeish := rev
	if prefix != "" {
		treeish = rev + ":" + prefix
		if _, err := git(ctx, env, top, nil, "rev-parse", "--verify", "--quiet", treeish); err != nil {
			return "", rev, cleanup, nil
		}
	}

	tmp, err := os.MkdirTemp("", "sbx-against-")
	if err != nil {
		return "", "", cleanup, err
	}
	cleanup = func() { os.RemoveAll(tmp) }
	var archive bytes.Buffer
	if _, err := git(ctx, env, top, &archive, "archive", "--format=tar", treeish); err != nil {
		cleanup()
		return "", "", func() {}, fmt.Errorf("-against %s: %v", rev, err)
	}
	if err := extractTar(&archive, tmp); err != nil {
		cleanup()
		return "", "", func() {}, fmt.Errorf("-against %s: extracting %s: %v", rev, treeish, err)
	}
	return tmp, rev, cleanup, nil
}

// isRevision reports whether rev names a commit of the git repository
// holding dir (false when dir is in none).
func isRevision(ctx context.Context, env *Env, dir, rev string) bool {
	top, err := git(ctx, env, dir, nil, "rev-parse", "--show-toplevel")
	if err != nil {
		return false
	}
	_, err = git(ctx, env, strings.TrimSpace(top), nil, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	return err == nil
}

// git runs git -C dir args. With out set, stdout goes there and the
// returned string is empty.
//
// dir is a checkout under review, so git is told not to take a directory
// in it that looks like a bare repository (HEAD, objects/, refs/ and a
// config of the checkout's choosing) for the repository it runs in:
// only the repository the user cloned is used (safe.bareRepository).
func git(ctx context.Context, env *Env, dir string, out io.Writer, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-c", "safe.bareRepository=explicit", "-C", dir}, args...)...)
	cmd.Env = env.Environ
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	if out != nil {
		cmd.Stdout = out
	}
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return "", errors.New("git " + strings.Join(args, " ") + ": " + msg)
	}
	return stdout.String(), nil
}

// extractTar writes the regular files and directories of a git archive
// under dst. Symbolic links and other entries are skipped (a spec
// directory needs none), and no entry may leave dst.
func extractTar(r io.Reader, dst string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean(h.Name)
		if name == "." || path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			continue
		}
		target := filepath.Join(dst, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, tr); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
		}
	}
}
