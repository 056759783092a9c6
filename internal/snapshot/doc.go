// Package snapshot keeps saved machines for warm starts: a booted guest,
// saved at its agent's ready point before anything of one sandbox was
// given to it, from which every later sandbox of the same shape resumes
// instead of booting.
//
// A snapshot is a directory in the cache named by its Shape's Key (the
// image's files by digest, the machine's size and devices, the
// hypervisor, this format's version): the devices' state as the
// hypervisor saved it, the guest's RAM (a sparse file), the root disk's
// overlay as the boot left it, and meta.json, which records the
// digests of the three. Get verifies all three before a resume may use
// them — the memory as it is copied into the sealed memory file the
// machines map (machine.SealMemory) — so a corrupt or mismatched
// snapshot is an error the caller answers with a cold boot, never a
// broken sandbox. Create makes one under a lock, so that concurrent
// first starts of a shape boot it once; a snapshot is written in a
// temporary directory and renamed into place whole.
//
// Nothing in a snapshot is a sandbox's own: it is taken before the
// guest is configured, so it holds no secret's placeholder, no policy,
// mount, host name or address of a sandbox (docs/warm-starts.md).
package snapshot
