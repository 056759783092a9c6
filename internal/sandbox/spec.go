package sandbox

import (
	"time"

	"github.com/sbx-dev/sbx/internal/proto/imageinfo"
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
	Image *Image `json:"image"`
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

// Names of the outputs of an Image a sandbox boots (internal/build/image
// names its outputs the same; a test of package pipeline checks).
const (
	OutputKernel    = "kernel"
	OutputInitramfs = "initramfs"
	OutputDisk      = "disk"
)

// Image is a built image as a sandbox boots it. Its JSON is that of the
// image builder's result (internal/build/image.Result), which spec.json
// files hold, with the two things the machine needs of the image's
// manifest beside it; this package does not import the builder, so that
// neither the supervisor nor the machine links it (pipeline.SandboxImage
// converts).
type Image struct {
	// Image is the image block's name.
	Image string
	// InputHash, BuildKey and Cached describe the build, as the builder
	// reported it.
	InputHash string
	BuildKey  string
	Cached    bool
	// Outputs are the built files, by OutputKernel, OutputInitramfs,
	// OutputDisk (and the builder's other outputs).
	Outputs map[string]ImageOutput
	// Manifest is the path of the build's image.json.
	Manifest string
	// KernelVersion is the kernel release, DiskSize the root
	// filesystem's size in bytes.
	KernelVersion string
	DiskSize      int64
	// Packages and Executables are the image's inventory.
	Packages    []imageinfo.Package
	Executables []imageinfo.Executable
	// Platform ("linux/amd64") and Cmdline (the spec's extra kernel
	// parameters) are the manifest's. A spec.json written before they
	// were recorded has neither; such a spec is read, but not booted.
	Platform string `json:",omitempty"`
	Cmdline  string `json:",omitempty"`
}

// ImageOutput is one built file.
type ImageOutput struct {
	// Path is the file's path, in the cache or an export directory.
	Path string
	// Digest is "sha256:<hex>" of its bytes.
	Digest string
	Size   int64
}
