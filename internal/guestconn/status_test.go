package guestconn

import "testing"

func TestShellCode(t *testing.T) {
	for _, c := range []struct {
		st   ExitStatus
		want int
	}{
		{ExitStatus{Code: 0}, 0},
		{ExitStatus{Code: 3}, 3},
		{ExitStatus{Code: -1, Signal: "SIGKILL"}, 137},
		{ExitStatus{Code: -1, Signal: "SIGTERM"}, 143},
		{ExitStatus{Code: -1, Signal: "SIGSYS"}, 159},
		{ExitStatus{Code: -1, Signal: "SIGNOPE"}, 129},
	} {
		if got := c.st.ShellCode(); got != c.want {
			t.Errorf("%+v: ShellCode() = %d, want %d", c.st, got, c.want)
		}
	}
}
