// Package fuseproto is the FUSE kernel ABI as the host's file server
// (package vfs) speaks it to a guest kernel's virtiofs client, or to the
// host kernel through /dev/fuse: the request header and arguments the
// kernel sends, the replies it takes, and their little-endian layouts
// (Linux's include/uapi/linux/fuse.h, protocol 7.36; kernels from 7.31
// on are served).
//
// Decoding trusts nothing: DecodeHeader refuses a request whose
// header's length disagrees with the bytes given; DecodeArgs refuses
// arguments whose fixed part has the wrong size, names that are empty,
// longer than 255 bytes, or hold "/" or NUL (or are "." or ".."),
// symbolic link targets beyond 4095 bytes, writes beyond the
// negotiated max_write or whose size disagrees with their data, read
// sizes beyond it, and forget batches whose count disagrees with their
// length. Refusals carry the errno to answer with (*Error). Nothing
// decoded aliases more than the request's own bytes.
//
// It does not serve anything (package vfs does) and knows nothing of
// virtqueues (the vhost-user backend carries the bytes). Entry points:
// DecodeHeader, DecodeArgs, the Append methods of the reply types, and
// EncodeRequest for clients and tests.
package fuseproto
