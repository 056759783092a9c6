package operation

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// AgainstDir returns the directory holding the configuration a plan is
// compared with. If rev names an existing directory, that is it. Otherwise
// rev is a git revision of the repository holding dir: the configuration's
// directory at that revision is extracted (extractTree) into a new
// temporary directory, which cleanup removes. If the directory did not
// exist at that revision, other is empty: the configuration is new. label
// names the other side in the plan.
//
// A name that is both a directory and a revision of the repository holding
// dir is an error: the checkout under review may hold a directory named
// like the revision it is reviewed against ("main", "origin/main", "HEAD")
// with a copy of its own configuration in it, which would make the plan
// compare the change with itself.
//
// environ is the environment git runs with.
func AgainstDir(ctx context.Context, environ []string, dir, rev string) (other, label string, cleanup func(), err error) {
	cleanup = func() {}
	if info, statErr := os.Stat(rev); statErr == nil && info.IsDir() {
		if !strings.HasPrefix(rev, "-") && isRevision(ctx, environ, dir, rev) {
			return "", "", cleanup, fmt.Errorf("-against %s is ambiguous: it is both a directory and a git revision of the repository holding %s; write ./%s (or an absolute path) for the directory, or the revision's full name (refs/heads/…, refs/remotes/…, a commit id) for the revision", rev, dir, filepath.Clean(rev))
		}
		return rev, rev, cleanup, nil
	}
	if strings.HasPrefix(rev, "-") {
		return "", "", cleanup, fmt.Errorf("-against %q is neither a directory nor a git revision", rev)
	}
	top, err := git(ctx, environ, dir, nil, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", "", cleanup, fmt.Errorf("-against %s: %s is not a directory, and %s is not in a git repository to read it as a revision from: %v", rev, rev, dir, err)
	}
	top = strings.TrimSpace(top)
	prefix, err := git(ctx, environ, dir, nil, "rev-parse", "--show-prefix")
	if err != nil {
		return "", "", cleanup, fmt.Errorf("-against %s: %v", rev, err)
	}
	prefix = strings.TrimSuffix(strings.TrimSpace(prefix), "/")
	if _, err := git(ctx, environ, top, nil, "rev-parse", "--verify", "--quiet", rev+"^{commit}"); err != nil {
		return "", "", cleanup, fmt.Errorf("-against %s: not a directory, and not a revision of the git repository at %s", rev, top)
	}
	treeish := rev
	if prefix != "" {
		treeish = rev + ":" + prefix
		if _, err := git(ctx, environ, top, nil, "rev-parse", "--verify", "--quiet", treeish); err != nil {
			return "", rev, cleanup, nil
		}
	}

	tmp, err := os.MkdirTemp("", "sbx-against-")
	if err != nil {
		return "", "", cleanup, err
	}
	cleanup = func() { os.RemoveAll(tmp) }
	if err := extractTree(ctx, environ, top, treeish, tmp); err != nil {
		cleanup()
		return "", "", func() {}, fmt.Errorf("-against %s: %v", rev, err)
	}
	return tmp, rev, cleanup, nil
}

// extractTree writes the regular files of the git tree treeish of the
// repository at top under dst, as committed: their bytes are read with
// git cat-file, so no filter driver, end-of-line conversion or
// export-subst the repository's attributes and configuration name is
// applied (git archive would run a filter's command). Symbolic links and
// submodules are skipped (a spec directory needs none), and no path may
// leave dst: every file is written through an os.Root on dst (writeFile),
// so neither a name with ".." or a leading "/" nor a symbolic link found
// on the way can place a file outside it.
func extractTree(ctx context.Context, environ []string, top, treeish, dst string) error {
	list, err := git(ctx, environ, top, nil, "ls-tree", "-r", "-z", treeish)
	if err != nil {
		return err
	}
	var files []blobFile
	for _, rec := range strings.Split(list, "\x00") {
		if rec == "" {
			continue
		}
		// "<mode> SP <type> SP <object> TAB <path>"
		meta, name, ok := strings.Cut(rec, "\t")
		fields := strings.Fields(meta)
		if !ok || len(fields) != 3 {
			return fmt.Errorf("git ls-tree %s: unexpected line %q", treeish, rec)
		}
		if fields[1] != "blob" || (fields[0] != "100644" && fields[0] != "100755") {
			continue
		}
		if !filepath.IsLocal(name) {
			continue
		}
		files = append(files, blobFile{fields[2], name})
	}
	if len(files) == 0 {
		return nil
	}
	var in bytes.Buffer
	for _, e := range files {
		in.WriteString(e.oid + "\n")
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer root.Close()
	// The blobs stream from git to their files: a revision may hold a
	// blob of any size, and only a buffer's worth of it is in memory.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	gitErr := make(chan error, 1)
	go func() {
		_, err := gitIn(ctx, environ, top, &in, pw, "cat-file", "--batch")
		pw.CloseWithError(err)
		gitErr <- err
	}()
	if err := readBlobs(root, files, bufio.NewReader(pr)); err != nil {
		// Ends git, which may be blocked writing what is left.
		cancel()
		pr.Close()
		<-gitErr
		return err
	}
	pr.Close()
	return <-gitErr
}

// blobFile is a file to extract: its blob's object id and its name.
type blobFile struct{ oid, name string }

// readBlobs reads git cat-file --batch's answer for files, in their
// order, writing each blob to its file in root.
func readBlobs(root *os.Root, files []blobFile, r *bufio.Reader) error {
	for _, e := range files {
		// "<object> SP blob SP <size> LF <content> LF"
		header, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("git cat-file: %s: %v", e.name, err)
		}
		fields := strings.Fields(header)
		if len(fields) != 3 || fields[0] != e.oid || fields[1] != "blob" {
			return fmt.Errorf("git cat-file: %s: unexpected answer %q", e.name, strings.TrimSpace(header))
		}
		size, err := strconv.ParseInt(fields[2], 10, 64)
		if err != nil || size < 0 {
			return fmt.Errorf("git cat-file: %s: bad size %q", e.name, fields[2])
		}
		if err := writeFile(root, e.name, r, size); err != nil {
			return fmt.Errorf("git cat-file: %s: %v", e.name, err)
		}
		if b, err := r.ReadByte(); err != nil || b != '\n' {
			return fmt.Errorf("git cat-file: %s: the content does not end where its size says", e.name)
		}
	}
	return nil
}

// writeFile creates the file name (slash-separated, relative) in root,
// with its parent directories, and copies size bytes of r into it. The
// file must not exist. root confines every step: a name that climbs out
// ("../x"), is absolute, or passes through a symbolic link leading out of
// root is an error, and nothing is written outside root.
func writeFile(root *os.Root, name string, r io.Reader, size int64) error {
	name = filepath.FromSlash(name)
	if dir := filepath.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = io.CopyN(f, r, size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// isRevision reports whether rev names a commit of the git repository
// holding dir (false when dir is in none).
func isRevision(ctx context.Context, environ []string, dir, rev string) bool {
	top, err := git(ctx, environ, dir, nil, "rev-parse", "--show-toplevel")
	if err != nil {
		return false
	}
	_, err = git(ctx, environ, strings.TrimSpace(top), nil, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	return err == nil
}

// git runs git -C dir args. With out set, stdout goes there and the
// returned string is empty.
//
// dir is a checkout under review, so git is told not to take a directory
// in it that looks like a bare repository (HEAD, objects/, refs/ and a
// config of the checkout's choosing) for the repository it runs in:
// only the repository the user cloned is used (safe.bareRepository).
//
// The repository's own configuration may be the guest's (a repository a
// sandbox made inside a writable mount), so git may use no
// transport at all (GIT_ALLOW_PROTOCOL empty, which overrides any
// protocol.*.allow in it): a lazy fetch of a missing object in a partial
// clone would run the upload-pack command that configuration names, and
// plan contacts no one anyway.
func git(ctx context.Context, environ []string, dir string, out io.Writer, args ...string) (string, error) {
	return gitIn(ctx, environ, dir, nil, out, args...)
}

// gitIn is git with stdin as git's standard input.
func gitIn(ctx context.Context, environ []string, dir string, stdin io.Reader, out io.Writer, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-c", "safe.bareRepository=explicit", "-C", dir}, args...)...)
	cmd.Env = append(slices.Clone(environ), "GIT_ALLOW_PROTOCOL=")
	cmd.Stdin = stdin
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
