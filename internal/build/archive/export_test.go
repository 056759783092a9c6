package archive

// SetMaxEntries sets the entry bound of ExtractFileTo for a test and
// returns the function that restores it.
func SetMaxEntries(n int) (restore func()) {
	old := maxEntries
	maxEntries = n
	return func() { maxEntries = old }
}
