// Package termtext makes text that sbx does not control — a guest's error
// messages and exit reasons, a supervisor's status, a VM's console —
// safe to print on a terminal and in a plan: control characters are
// escaped visibly, so the text can neither send escape sequences to the
// terminal (colours, titles, cursor moves, OSC 8 links), rewrite what is
// already on screen with carriage returns, reorder it with bidirectional
// controls, nor start a line of its own that passes for sbx's output.
//
// Line is for text printed within one line (a table cell, a plan's
// reason); Block is for text that may rightly span lines (an error that
// quotes a console), each line after the first under a visible prefix;
// Writer escapes a stream (sbx logs on a terminal).
//
// It does not decide what is trusted: callers quote what comes from
// outside. It never prints.
package termtext
