// Package gondolin writes the pieces of a Gondolin guest-asset directory,
// so that an image built by sbx can run under Gondolin: the legacy-LZ4
// initramfs ([CompressLegacyLZ4]) and manifest.json ([NewManifest],
// [WriteManifest]), plus [ReadManifest] and [Verify] to check a directory.
//
// A directory holds vmlinuz-virt (the kernel), initramfs.cpio.lz4 (a newc
// archive, package cpio, in the kernel's legacy LZ4 framing), rootfs.ext4
// (writable ext4 labelled "gondolin-root", made by the ext4 builder) and
// manifest.json. This package does not build the kernel, archive or file
// system; it frames, hashes and describes them.
//
// # What Gondolin reads, and where this follows it
//
// Followed: github.com/earendil-works/gondolin at commit
// 8a8b762d8ed54a6af61c9579e5161d9133271e80 (package version 0.8.1),
// re-implemented from reading, no code copied.
//
// host/src/assets.ts, computeAssetBuildId and uuidv5: the buildId is a
// version 5 UUID (SHA-1, RFC 9562) in the namespace
// 7b6ed0c0-7e7f-4c2a-8b2d-0bf3d5be9d52 over the UTF-8 string made of these
// lines joined by "\n", with no trailing newline ([BuildID]):
//
//	gondolin-asset-build
//	kernel=<sha256 hex of the kernel>
//	initramfs=<sha256 hex of the initramfs>
//	rootfs=<sha256 hex of the rootfs>
//	krunKernel=<sha256 hex>   (only when the manifest has a krun kernel)
//	krunInitrd=<sha256 hex>   (only when the manifest has a krun initrd)
//	arch=<config.arch, or "unknown" when unset>
//
// The manifest fields Gondolin writes and reads:
//
//   - host/src/build/shared.ts, writeAssetManifest: the manifest is
//     {version: 1, buildId, config, buildTime, assets, checksums} with
//     runtimeDefaults copied from config.runtimeDefaults when set (and
//     ociSource, which sbx does not produce), written with two-space
//     indentation. buildTime there is the wall clock; here it is given by
//     the caller (SOURCE_DATE_EPOCH) so the manifest is reproducible.
//   - host/src/assets.ts, loadGuestAssets and assetsExist: assets.kernel,
//     assets.initramfs and assets.rootfs name the files (defaults
//     vmlinuz-virt, initramfs.cpio.lz4, rootfs.ext4); assets.krunKernel
//     and assets.krunInitrd are optional.
//   - host/src/images.ts, importImageFromDirectory: buildId must match
//     /^[0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
//     and becomes the image store key; config.arch must normalise to
//     "x86_64" or "aarch64"; asset names must stay inside the directory.
//   - host/src/build/index.ts, verifyAssets: checksums.* are the sha256 hex
//     digests of the named files.
//   - host/src/vm/core.ts, resolveManifestRootfsMode: runtimeDefaults.rootfsMode
//     ("readonly", "memory" or "cow"; Gondolin defaults to "cow").
//   - host/bin/gondolin.ts prints buildTime, config.arch and config.distro.
//   - host/src/build/config.ts: rootfs.label defaults to "gondolin-root";
//     the guest mounts root=/dev/vda (guest/image/initramfs-init), so the
//     label is recorded rather than relied on.
//   - host/src/alpine/utils.ts packs the initramfs with
//     `cpio --format=newc | lz4 -l`: the legacy LZ4 format, magic
//     0x184C2102 followed by blocks of a 32-bit little-endian compressed
//     size and an LZ4 block of 8 MiB of input (less for the last).
package gondolin
