// Package archivetest writes real archives for tests — tar, compressed
// tar, .deb (an ar archive around control.tar and data.tar) and .apk
// (concatenated gzip streams) — and fetches real Debian packages into a
// per-user cache with AptDownload, so that tests read the formats
// themselves rather than stand-ins.
//
// It is test support: it reports problems through testing.TB and is
// imported only from _test.go files and other test-support packages
// (internal/build/kernel/kerneltest). Reading archives is package archive's.
//
// The entry points are Tar, Deb, APK and AptDownload; LargeTarGz writes
// an archive too large to hold in memory comfortably, as a stream.
package archivetest
