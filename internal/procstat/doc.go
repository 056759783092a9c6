// Package procstat reads a process's state from /proc/PID/stat: its state
// letter and process group, and whether it still runs (a zombie does
// not). It is the one parser of that file in sbx; the supervisor decides
// from it which processes it may signal, and tests use it to wait for
// processes to end.
//
// The command name in the file is in parentheses and may hold spaces and
// parentheses of its own, so the fields are read after its last ')'.
// Where there is no /proc (macOS), Read fails and Alive reports false.
package procstat
