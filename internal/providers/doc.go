// Package providers is the home of the places where sandboxes
// materialize. Each provider is a subpackage: providers/qemu runs a
// sandbox as a local QEMU micro-VM.
//
// This package holds no code. Building the images a provider boots is
// the builders' job (builders/...), deciding what to change is package
// plan's, and the guest side of the machine is package guest's.
package providers
