package kernel

// SetWalked sets the function called with each archive entry a walk
// goes on to read, and returns the function that restores the last one.
func SetWalked(fn func(name string)) (restore func()) {
	old := walked
	walked = fn
	return func() { walked = old }
}
