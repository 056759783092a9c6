// Package initsystest gives tests of the guest agent a Sys that records
// the system calls the boot makes instead of making them, so that the
// boot steps run on the host against a temporary directory. Reading and
// writing files is left real: the directory stands for the guest's root.
//
// It is test support, imported only from tests; the real calls are
// initsys.Linux, which the QEMU boot tests exercise.
//
// The entry point is Recorder.
package initsystest
