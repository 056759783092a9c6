//go:build race

package netstack

// raceEnabled: the race detector slows the stacks about tenfold, so the
// large transfers are made smaller.
const raceEnabled = true
