package guestconn

import "testing"

// TestCmdCheck: the forms of User and Dir that no guest could accept are
// refused on the host, and the others pass, whether or not the guest has
// such a user or directory.
func TestCmdCheck(t *testing.T) {
	for _, c := range []struct {
		cmd Cmd
		ok  bool
	}{
		{Cmd{Args: []string{"true"}}, true},
		{Cmd{Args: []string{"true"}, User: "agent", Dir: "/work"}, true},
		{Cmd{Args: []string{"true"}, User: "1000:1000"}, true},
		{Cmd{Args: []string{"true"}, User: "nobody-here:staff", Dir: "/no/such/dir"}, true},
		{Cmd{}, false},
		{Cmd{Args: []string{""}}, false},
		{Cmd{Args: []string{"true"}, User: ":1000"}, false},
		{Cmd{Args: []string{"true"}, User: "agent:"}, false},
		{Cmd{Args: []string{"true"}, User: "a\x00b"}, false},
		{Cmd{Args: []string{"true"}, Dir: "work"}, false},
		{Cmd{Args: []string{"true"}, Dir: "./work"}, false},
		{Cmd{Args: []string{"true"}, Dir: "/wo\x00rk"}, false},
	} {
		if err := c.cmd.Check(); (err == nil) != c.ok {
			t.Errorf("%+v: Check() = %v, want ok %v", c.cmd, err, c.ok)
		}
	}
}
