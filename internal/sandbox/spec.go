package sandbox

import (
	"time"

	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxfs"
	"github.com/sbx-dev/sbx/policy"
)

// Spec is one sandbox as it is started: everything Start needs but the
// secrets' values and where the host keeps its files (Options). A
// supervisor keeps it as JSON in its directory's spec.json and reads it
// back, after an upgrade of sbx too: the JSON names of its fields are a
// contract, and a field is only ever added.
type Spec struct {
	// Name is the sandbox's name.
	Name string `json:"name"`
	// ConfigDir is the configuration directory the sandbox belongs to,
	// for listings ("sbx ps -a"); empty when it belongs to none.
	ConfigDir string `json:"config_dir,omitempty"`
	// Image is the built image to boot.
	Image *image.Result `json:"image"`
	// CPUs and Memory size the machine; zero means machine's defaults.
	CPUs   int   `json:"cpus,omitempty"`
	Memory int64 `json:"memory,omitempty"`
	// User and Env are the defaults of the commands run in the sandbox:
	// its user, and "KEY=value" entries (the image's environment, then the
	// sandbox's). Start does not apply them; clients such as "sbx exec"
	// read them here, so that they match the running sandbox rather than
	// a configuration edited since.
	User string   `json:"user,omitempty"`
	Env  []string `json:"env,omitempty"`
	// BootTimeout and StopTimeout bound the boot and a graceful stop;
	// zero means machine's defaults.
	BootTimeout time.Duration `json:"boot_timeout,omitempty"`
	StopTimeout time.Duration `json:"stop_timeout,omitempty"`
	// Policy is the sandbox's egress, secret and mount policy. Its
	// egress is enforced on the machine's network device (package
	// sandboxnet); the secrets' values are never in the spec
	// (Options.Secrets). Sandbox.Update replaces it in a running sandbox.
	Policy policy.Sandbox `json:"policy"`
	// Mounts are the sandbox's workspace mounts as it serves them: host
	// directories made absolute, owners as numbers.
	Mounts []sandboxfs.Mount `json:"mounts,omitempty"`
}
