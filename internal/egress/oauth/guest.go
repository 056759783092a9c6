package oauth

// AccessPlaceholder returns the access placeholder last minted (by
// Render or a refresh), for the secret's environment variable: it
// stands for the current access token as any other does. Empty before
// the first Render.
func (l *Login) AccessPlaceholder() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.guest.access
}
