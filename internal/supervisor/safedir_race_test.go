package supervisor

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Apply starts the sandboxes of one configuration at once, and Remove
// takes the configuration's directory with its last sandbox: one
// sandbox's directory being made while another's is removed must still
// be made, not fail because its parent vanished in between.
func TestSecureDirWhileParentGoes(t *testing.T) {
	base := t.TempDir()
	if err := os.Chmod(base, 0o700); err != nil {
		t.Fatal(err)
	}
	parent := filepath.Join(base, "cfg")
	deadline := time.Now().Add(10 * time.Second)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		// The other sandboxes: made and removed, their parent with
		// them, as Remove does, thousands of times a second (a real
		// Remove first stops a machine, which takes milliseconds): each
		// walk of secureDir may lose its parent, and a few walks in a
		// row may, but not every one.
		defer wg.Done()
		for i := 0; i < 200000 && time.Now().Before(deadline); i++ {
			select {
			case <-stop:
				return
			default:
			}
			os.Mkdir(parent, 0o700)
			os.Mkdir(filepath.Join(parent, "a"), 0o700)
			os.Remove(filepath.Join(parent, "a"))
			os.Remove(parent)
			time.Sleep(20 * time.Microsecond)
		}
	}()
	failed := 0
	for i := 0; i < 3000 && time.Now().Before(deadline); i++ {
		dir := filepath.Join(parent, "b")
		if err := secureDir(dir, 2, true); err != nil {
			failed++
			if failed <= 3 {
				t.Errorf("attempt %d: %v", i, err)
			}
			continue
		}
		if err := os.Remove(dir); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if failed > 0 {
		t.Errorf("%d of the directories were not made", failed)
	}
}
