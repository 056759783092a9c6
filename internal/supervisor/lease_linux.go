package supervisor

import "github.com/sbx-dev/sbx/internal/procstat"

// leaseHolder reports whether l's process is alive: its id exists, is
// not a zombie, and started when the lease says.
func leaseHolder(l Lease) bool {
	st, err := procstat.Read(l.Pid)
	return err == nil && !st.Zombie() && st.Start == l.Start
}

// LeaseOf returns the lease on process pid as it is now.
func LeaseOf(pid int) (Lease, error) {
	st, err := procstat.Read(pid)
	if err != nil {
		return Lease{}, err
	}
	return Lease{Pid: pid, Start: st.Start}, nil
}
