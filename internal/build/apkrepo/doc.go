// Package apkrepo reads Alpine package repositories, computes the
// dependency closure of a set of packages and installs pinned packages
// into a root file system tree, without running package scripts.
//
// It holds the same four parts as package internal/build/debrepo, so that the
// image build can pick one by the base image's family:
//
//   - Repositories and keys: ReadBase reads a base image's
//     /etc/apk/repositories, /etc/apk/keys, /etc/apk/arch,
//     /lib/apk/db/installed and /etc/apk/world from its tree; a spec may
//     name other repositories (ParseRepositories) and keys (ParseKey).
//     sbx never names a mirror itself.
//   - Client: Index fetches URL/ARCH/APKINDEX.tar.gz from each
//     repository and verifies it (VerifyIndex) before parsing a byte of
//     it (ParseIndex). Fetch downloads an index's package at lock time,
//     verifies it (VerifyPackage) and returns its Pin with the whole
//     file's sha256; Download brings a pinned package back at build time
//     and checks the pin, then verifies it again.
//   - Resolve: the closure of world constraints over an Index — version
//     constraints in apk's ordering (CompareVersions), so:/cmd:/pc:
//     virtual names through provides, packages the base image already
//     has, conflicts ("!name") and names owned twice — with errors that
//     name the chain of dependencies. Its doc comment lists every rule.
//   - Install: unpacks verified packages into a layers.Tree in name
//     order and writes the installed database (the same F:/R:/a:/Z:
//     records apk writes, Z: being the SHA-1 of a file's content or a
//     link's target, as abuild's per-file checksums are) and world. On a
//     base whose top-level directories are links into /usr, package
//     paths under them are written under /usr, since the tree never
//     follows links.
//
// What is verified. An index is refused unless its first gzip member is
// a signature tar holding .SIGN.RSA.<key> (SHA-1), .SIGN.RSA256.<key> or
// .SIGN.RSA512.<key>, <key> is a trusted key's file name, and the RSA
// PKCS#1 v1.5 signature verifies over every byte after that member;
// unsigned indexes, indexes signed only by unknown keys and keys under
// 2048 bits are refused. A package is refused unless the same holds for
// its control member (signature over the control member's compressed
// bytes), the control member's identity ("Q1" + base64 SHA-1) equals the
// index's C: field (or the pin's), its .PKGINFO has a datahash, and the
// SHA-256 of the data member equals it. The lock pins the sha256 and
// size of the whole .apk; Download refuses other bytes. Install verifies
// each .apk again before unpacking it, refuses entries that escape the
// root, drops setuid/setgid bits and extended attributes (file
// capabilities) and leaves out device nodes.
//
// What is not reproduced. No script runs: .pre-install, .post-install,
// .pre-upgrade, .post-upgrade, .trigger and the rest are listed in
// Result.NotRun, and declared trigger directories in Result.Triggers.
// Their effects are therefore absent: users and groups a .pre-install
// adds with addgroup/adduser, busybox's applet links (busybox
// --install), ca-certificates' bundle (update-ca-certificates), kernel
// module and font indexes, and the like; an image that needs one must
// carry the file itself, or a later sbx step must make it. Musl's
// dynamic loader needs no cache, so nothing stands in for ldconfig.
// install_if (i:) is parsed but never brings a package in. Repository
// tags ("@edge") are read and ignored: every configured repository is
// searched. The installed database has no scripts.tar or triggers file.
//
// Package apkrepo does not decide what an image holds (package lang
// reads the spec, internal/build/resolve writes pins into the lock) and does
// not build disks (internal/build/rootfs and internal/build/ext4 do).
package apkrepo
