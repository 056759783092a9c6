// Package rootfs assembles an image's root file system from its fetched
// inputs: the base image's layers, the artifacts, the user accounts, the file
// blocks and the files sbx itself puts in /etc for the guest agent.
//
// Assemble returns the result as a *layers.Tree; (*layers.Tree).WriteTar
// turns it into the canonical tar stream and package internal/build/ext4 into a
// disk image (BuildDisk does both). Everything happens in that in-memory
// tree, with file contents in a spill file: nothing is written to, or looked
// up on, the host file system, and symbolic links in the image are never
// followed — every path is taken literally.
//
// The steps, in order:
//
//  1. Base. The base image's layers are flattened (package internal/build/layers
//     applies whiteouts), or, without a base, the tree starts empty. The
//     directories the guest agent and programs need are created where
//     missing, never changed where present: /dev, /etc, /etc/sbx,
//     /etc/ssl/certs, /proc, /root (0700), /run, /sys, /tmp (1777), /var and
//     /var/tmp (1777). The base image's configured environment (its config's
//     Env) is kept for step 4.
//
//     Then packages (Options.Packages, the image's pinned package set, fetched
//     and verified): installed by debrepo.Install in package-name order —
//     data trees unpacked without maintainer scripts, the dpkg database
//     written, the CA bundle rebuilt (docs/packages.md lists what is and
//     is not reproduced). An image with packages and none given is an
//     error. Over an Alpine base, Options.Apk's packages are fetched from
//     the repositories and with the keys the base's /etc/apk files (or
//     the spec) name and installed by apkrepo.Install: no script run,
//     the apk installed database and world written.
//
//  2. Artifacts, sorted by name (recipe.Canonical), each over the ones
//     before. Without extract, one file goes to dest: the file the
//     artifact's file names inside the archive (a glob must match exactly
//     one file; links inside the archive are followed; an npm tarball's
//     entries are under "package/"), or the download itself when file is
//     empty; either is streamed into the tree's spill file, never held in
//     memory whole. Its mode is the artifact's mode or, when none is given, 0755 if
//     the archive entry has an execute bit and 0644 otherwise (0644 for a
//     whole download); its owner is the artifact's uid and gid. With extract
//     = true every entry of the archive (the data tree of a .deb or .apk, the
//     flattened file system of an OCI image) is created under dest, keeping
//     the archive's modes, owners, symbolic links, hard links, FIFOs and
//     extended attributes, except that a non-zero uid or gid on the artifact
//     owns every entry instead (and dest, when the artifact creates it), and
//     that, unless the artifact sets keep_special, setuid and setgid bits
//     are cleared, character and block devices (and hard links to them) are
//     left out and the security.capability attribute is dropped: a pinned
//     archive brings no privilege into the image unless the spec says so.
//     The base image's layers keep theirs. An entry that would land or point outside
//     dest (archive.CheckEntry) is an error naming the artifact and entry,
//     and so is an entry that would replace a directory of the image with a
//     non-directory, or a symbolic link with a directory (as when a package's
//     bin/ meets a base whose /bin is a link to usr/bin). A missing file is
//     an error naming the artifact, the archive and the path, with the names
//     that came close. Missing parent directories are created 0755, owned by
//     root. A dest (or any path below it) whose parent directory is a
//     symbolic link in the image is an error: links are not followed, so
//     name the path the link points at; a symbolic link at dest itself is
//     replaced by the file.
//
//  3. Users, sorted by name. /etc/passwd, /etc/group and /etc/shadow (and
//     /etc/gshadow when the image has one) keep every line they have and
//     get root added if they lack it (password "*", locked) — every image
//     has root. Each user is appended with password "!" (locked: the agent
//     starts processes as users, nobody logs in). A user already present
//     with the same uid is updated to the spec's gid, home and shell; the
//     same name with another uid, or the uid under another name, is an
//     error. The primary group is any group with the user's gid, or else a
//     new group named after the user (an error if a group of that name has
//     another gid). Each supplementary group is joined if it exists and
//     otherwise created with the lowest gid from 1000 up that no group has
//     and no declared user has as its gid, so the same spec and base always
//     give the same gids. New account files are 0644 root:root, and 0640
//     root:shadow (0600 root:root without a shadow group) for shadow files;
//     existing ones keep their mode and owner. The home directory belongs to
//     the user, mode 0700: it is created if missing, and a home directory
//     that artifacts created (even as the parent of a file) is given to the
//     user; one that the base image already holds is left as it is. /etc/skel
//     is not copied.
//
//     Then executables, as declared: each is found by name in the usual
//     PATH directories or at its absolute path, through links inside the
//     tree; it must be a regular file with an execute bit, a script's
//     interpreter must be found the same way, and an ELF file's
//     interpreter and the closure of its DT_NEEDED libraries must resolve
//     in the image's library directories; a failure names what is
//     missing. Executables are checked before file blocks and symlinks.
//
//  4. sbx's files in /etc: /etc/hostname (Options.Hostname, or the image's
//     name made a host name), /etc/hosts (localhost and the host name),
//     /etc/resolv.conf naming the host network stack's resolver
//     (imageinfo.DNS), /etc/sbx/image.json (an imageinfo.Info the guest
//     agent reads at boot: name, platform, input hash, host name,
//     environment, users, network, and the installed packages and
//     checked executables) and, when the environment is not empty,
//     /etc/environment and /etc/profile.d/sbx.sh. The environment is the
//     base image's overridden by the spec's env. The per-install CA is not
//     part of any image: the agent installs it at boot at
//     imageinfo.CACertPath and into /etc/ssl/certs.
//
//  5. File blocks, sorted by path, each replacing what is at its path
//     (including the files of step 4, so a spec can supply its own
//     /etc/hosts); replacing a directory is an error.
//
// The tree, and the scratch tree an OCI artifact is flattened in, have the
// image's ContentLimits: file content written up to twice the image's
// size plus 64 MiB (DefaultMaxContent without one) and one entry per 4 KiB
// of it, within bounds. An input that expands past them (an archive bomb) stops assembly
// with an error naming the base or artifact.
//
// Everything in the tree is a function of the inputs, the image (as
// recipe.Canonical orders it) and Options: the same inputs give the same
// tree, and WriteTar the same bytes.
//
// Package rootfs does not fetch or verify inputs (package internal/build/fetch
// does), read archive formats (package internal/build/archive does), flatten layers
// or write tar streams (package internal/build/layers does) or lay out the ext4
// file system (package internal/build/ext4 does). The guest-side contract — the
// image description, the CA path and the guest's network addresses — is
// package internal/proto/imageinfo.
//
// The entry point is Assemble.
package rootfs
