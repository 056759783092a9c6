package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxnet"
)

// credentialFileScript writes its standard input to "$1" with mode "$2"
// as the user it runs as: the directory made if missing (0700 under a
// umask that gives group and others nothing), a temporary file beside
// it renamed over it, so the file is replaced whole.
const credentialFileScript = `umask 077; d=$(dirname -- "$1") && mkdir -p -- "$d" && t="$1.sbx-$$" && cat > "$t" && chmod "$2" "$t" && mv -f -- "$t" "$1"`

// deliverCredentialFiles writes the credential files the network
// rendered (sandboxnet.Net.CredentialFiles: placeholders only) into the
// guest, each by its owner, so that the owner's own directories hold
// it. The guest agent runs the writer; the host writes the file nowhere.
func deliverCredentialFiles(ctx context.Context, exec func(context.Context, guestconn.Cmd) (*guestconn.ExitStatus, error), files []sandboxnet.CredentialFile) error {
	for _, f := range files {
		var errOut strings.Builder
		st, err := exec(ctx, guestconn.Cmd{
			Args:   []string{"/bin/sh", "-c", credentialFileScript, "sh", f.Path, fmt.Sprintf("%04o", f.Mode)},
			User:   f.Owner,
			Dir:    "/",
			Stdin:  bytes.NewReader(f.Data),
			Stderr: &errOut,
		})
		if err == nil && st.Code != 0 {
			err = fmt.Errorf("exit %d: %s", st.Code, strings.TrimSpace(errOut.String()))
		}
		if err != nil {
			return fmt.Errorf("secret.%s: writing its credential file %s in the guest as %s: %w", f.Secret, f.Path, f.Owner, err)
		}
	}
	return nil
}
