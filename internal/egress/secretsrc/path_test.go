package secretsrc

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFilePath(t *testing.T) {
	dir := t.TempDir()
	auth := filepath.Join(dir, "auth.json")
	if err := os.WriteFile(auth, []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(auth, filepath.Join(dir, "link.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", dir)
	for _, c := range []struct {
		source, want string
		ok           bool
	}{
		{"file:auth.json", auth, true},
		{"file:" + auth, auth, true},
		{"file:~/auth.json", auth, true},
		{"file:./sub/../auth.json", auth, true},
		{"file:link.json", "", false}, // written back by rename, a link would be replaced
		{"file:sub", "", false},
		{"file:missing.json", "", false},
		{"env:HOME", "", false},
		{"file:", "", false},
	} {
		got, err := FilePath(c.source, dir)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("FilePath(%q) = %q, %v; want %q, ok %v", c.source, got, err, c.want, c.ok)
		}
	}
}
