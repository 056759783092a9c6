//go:build !linux

package supervisor

import "errors"

// errNoLease is what LeaseOf returns where processes cannot be told
// apart by start time.
var errNoLease = errors.New("supervisor: leases need /proc")

// leaseHolder is always true where there is no /proc: LeaseOf refuses
// to make a lease there, so none is checked.
func leaseHolder(Lease) bool { return true }

// LeaseOf returns an error: processes are told apart by /proc.
func LeaseOf(pid int) (Lease, error) { return Lease{}, errNoLease }
