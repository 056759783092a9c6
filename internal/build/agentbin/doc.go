// Package agentbin finds the guest agent binary (cmd/sbx-guest) to put in
// an image's initramfs, and builds it from source.
//
// The agent is a separate static Linux executable, one per guest
// architecture, built with CGO_ENABLED=0, -trimpath, -buildvcs=false and
// -ldflags='-s -w -buildid=' so that two builds of the same source with
// the same Go release are byte-identical (see
// docs/decisions/0003-guest-agent-binary.md). Find looks for it where a
// release or a developer puts it: the file or directory named by
// $SBX_GUEST_AGENT, then beside the running sbx executable; Check
// verifies that a candidate is a static ELF executable for the image's
// platform. When there is none, Find builds it with the local go tool
// into the cache, from the sbx source the running program was built from
// (SourceBuilder): the source tree when it is still there, else the sbx
// module version, downloaded through the go command's module proxy
// configuration. Both give the bytes of the documented build (see
// docs/decisions/0006-agent-found-or-built.md). Build runs the go tool to
// make one, for tests and for work from a source checkout.
//
// It does not write the initramfs (package internal/build/initramfs) and knows
// nothing of what the agent does (package guest).
//
// The entry points are Find and Build.
package agentbin
