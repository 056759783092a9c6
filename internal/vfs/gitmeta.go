package vfs

import "strings"

// Git protection. A read-write mount usually holds the user's git
// repository, and the user runs git on it on the host, as themselves.
// Git reads much of what it does from its git directory: configuration
// (config, config.worktree; core.fsmonitor, core.pager, core.sshCommand
// and the like name commands), hooks, where the repository really is
// (commondir, gitdir, a ".git" file), other object stores
// (objects/info/alternates, objects/info/http-alternates), remotes
// (remotes/, branches/), ignore and attribute rules (info/). Hide and
// read-only rules per file cannot keep up with that list, so the server
// protects every git directory it finds in a read-write mount when it
// starts, whatever the mount's rules (policy.Mount.GitWritable turns it
// off):
//
//   - In a git directory the guest may write only what commits,
//     checkouts, merges and fetches write (writableGitName, and the
//     objects, refs and logs trees); everything else, known or not,
//     is read-only. An allow list, so that a file a later git reads
//     is protected before anyone names it.
//   - Sequencer state (rebase-merge, rebase-apply, sequencer) lives in
//     the server's memory: its todo list can hold "exec" lines and
//     merge strategies, which "git rebase --continue" on the host would
//     run; the guest can still rebase, and the host never sees it.
//   - No symbolic link is made in a git directory, nor moved into one.
//   - Every ".git" entry, every git directory, and every link on the way
//     from a ".git" file or link to its git directory is read-only as
//     an entry: it cannot be removed, renamed, replaced or linked
//     over, and a directory holding one cannot be renamed (the rename
//     check compares classes).
//   - A mount that holds a repository, or lies inside one, is the
//     user's work tree: there the guest cannot make a ".git" (a nested
//     repository, which host git enters from the user's repository
//     through a gitlink in the index the guest may write) nor a "HEAD"
//     outside a git directory (which makes a directory a bare
//     repository git finds when run below it).
//
// A mount without any repository at its start is the guest's to make
// repositories in; running git on those on the host trusts the guest.
// The server finds git directories by their shape (gitDirShape), as git
// does, not only by the name ".git".
type gitGuard struct {
	// dirs are the git directories inside the mount, relative to its
	// root ("" when the root is one).
	dirs []string
	// inside is set when the mount's root lies inside a git directory
	// on the host, at the path above within it.
	inside bool
	above  string
	// pinned are single paths that are read-only: ".git" entries and the
	// links and missing names on the way to a git directory.
	pinned map[string]bool
	// repo says the mount holds or lies in a repository: the names
	// ".git" and "HEAD" are read-only outside git directories.
	repo bool
}

// gitPlace is what git protection makes of one path.
type gitPlace struct {
	readOnly bool
	// pinned says the path is part of how git finds its repository (a
	// ".git", a git directory, a link to one): read-only, and a
	// directory holding it cannot be renamed even where the new name
	// would be read-only too.
	pinned bool
	// mem says the path is sequencer state, kept in memory at memRoot.
	mem     bool
	memRoot string
	// inGit says the path is in a git directory, where the guest makes
	// no symbolic link: git on the host follows one when it writes
	// COMMIT_EDITMSG, FETCH_HEAD, a ref or a log, and would write
	// wherever the guest pointed it on the host.
	inGit bool
}

// classify returns what git protection makes of the path rel.
func (g *gitGuard) classify(rel string) gitPlace {
	p := g.classifyPath(rel)
	if g.pinned[rel] {
		p = gitPlace{readOnly: true, pinned: true, inGit: p.inGit}
	}
	return p
}

func (g *gitGuard) classifyPath(rel string) gitPlace {
	base, in := "", false
	for _, d := range g.dirs {
		under := d == "" || rel == d || len(rel) > len(d) && rel[len(d)] == '/' && rel[:len(d)] == d
		if under && (!in || len(d) > len(base)) {
			base, in = d, true
		}
	}
	if in {
		sub := strings.TrimPrefix(strings.TrimPrefix(rel, base), "/")
		p := gitDirPlace(sub)
		p.inGit = true
		if p.mem {
			p.memRoot = strings.TrimPrefix(base+"/"+p.memRoot, "/")
		}
		return p
	}
	if g.inside {
		p := gitDirPlace(strings.Trim(g.above+"/"+rel, "/"))
		if p.mem {
			// The mount's root is inside the git directory: the memory
			// tree's root may be above the mount. Read-only instead.
			p = gitPlace{readOnly: true}
		}
		p.inGit = true
		return p
	}
	if g.repo {
		name := rel[strings.LastIndexByte(rel, '/')+1:]
		if name == ".git" || name == "HEAD" {
			return gitPlace{readOnly: true}
		}
	}
	return gitPlace{}
}

// near reports whether rel is in a git directory, or holds one or a
// pinned path: where moving a directory can change what git protection
// makes of the paths under it. Elsewhere its classes depend on names
// only, which a rename keeps.
func (g *gitGuard) near(rel string) bool {
	if g.inside || g.classifyPath(rel).inGit {
		return true
	}
	under := func(p string) bool {
		return rel == "" || p == rel || len(p) > len(rel) && p[len(rel)] == '/' && p[:len(rel)] == rel
	}
	for _, d := range g.dirs {
		if under(d) {
			return true
		}
	}
	for p := range g.pinned {
		if under(p) {
			return true
		}
	}
	return false
}

// gitDirPlace classifies sub, a path relative to a git directory.
func gitDirPlace(sub string) gitPlace {
	if sub == "" {
		// The directory itself: it stays where git finds it.
		return gitPlace{readOnly: true, pinned: true}
	}
	top, rest, _ := strings.Cut(sub, "/")
	switch top {
	case "objects":
		if rest == "info/alternates" || rest == "info/http-alternates" {
			return gitPlace{readOnly: true}
		}
		return gitPlace{}
	case "refs", "logs", "reftable", "lost-found", "rr-cache", "lfs", "NOTES_MERGE_WORKTREE":
		return gitPlace{}
	case "rebase-merge", "rebase-apply", "sequencer":
		return gitPlace{mem: true, memRoot: top}
	}
	if rest == "" && writableGitName(top) {
		return gitPlace{}
	}
	// config*, commondir, gitdir, hooks/, info/, remotes/, branches/,
	// description, modules/ and worktrees/ (the git directories inside
	// them are classified as their own), and whatever a later git adds.
	return gitPlace{readOnly: true}
}

// writableGitName reports whether the file name, at the top of a git
// directory, is one git writes to record a commit, checkout, merge,
// fetch, bisect or rebase: state and data, never configuration, a
// command or a pointer to another repository. A lock file is what it
// locks.
func writableGitName(name string) bool {
	name = strings.TrimSuffix(name, ".lock")
	switch name {
	case "HEAD", "AUTO_MERGE", "index", "packed-refs",
		"COMMIT_EDITMSG", "MERGE_MSG", "MERGE_MODE", "MERGE_RR", "MERGE_AUTOSTASH", "SQUASH_MSG",
		"TAG_EDITMSG", "NOTES_EDITMSG", "ADD_EDIT.patch", "NOTES_MERGE_PARTIAL", "NOTES_MERGE_REF",
		"gc.pid", "gc.log", "gitk.cache",
		// shallow lists the commits whose parents a shallow clone lacks.
		// It adds no repository, configuration or command, and cuts
		// only history the guest could rewrite through the refs anyway;
		// git fetch --depth in the guest writes it.
		"shallow":
		return true
	}
	if strings.HasSuffix(name, "_HEAD") {
		// ORIG_HEAD, FETCH_HEAD, MERGE_HEAD, CHERRY_PICK_HEAD, ...
		return true
	}
	for _, prefix := range []string{"BISECT_", "sharedindex.", "index.stash.", "next-index-", "shallow_"} {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// gitDirShape reports whether a directory holding these entries is a
// git directory to git (setup.c's is_git_directory): a HEAD, and objects
// and refs directories or a commondir file naming where they are. The
// name ".git" makes one too, whatever it holds.
func gitDirShape(name string, has func(entry string, dir bool) bool) bool {
	if name == ".git" {
		return true
	}
	if !has("HEAD", false) {
		return false
	}
	return has("commondir", false) || (has("objects", true) && has("refs", true))
}
