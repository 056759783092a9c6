package image

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/sbx-dev/sbx/internal/proto/imageinfo"
	"os"
	"path/filepath"

	"github.com/sbx-dev/sbx/internal/atomicfile"
)

// ManifestFile is the name of the build manifest beside the outputs.
const ManifestFile = "image.json"

// ManifestVersion is the version of the Manifest document.
const ManifestVersion = 1

// Manifest is image.json: what a build made and from what. It is stored
// last, so a build whose manifest is present is whole.
type Manifest struct {
	Version   int    `json:"version"`
	Image     string `json:"image"`
	Platform  string `json:"platform"`
	InputHash string `json:"inputHash"`
	BuildKey  string `json:"buildKey"`
	// BaseKey and ProvisionHash are set for a provisioned build: the key
	// of the build its provision steps started from, and the steps'
	// hash (recipe.ProvisionHash). Its disk is the provisioned one.
	BaseKey       string `json:"baseKey,omitempty"`
	ProvisionHash string `json:"provisionHash,omitempty"`
	// FormatVersion is the builder's FormatVersion.
	FormatVersion int `json:"formatVersion"`
	// Epoch is every timestamp in the outputs (SOURCE_DATE_EPOCH).
	Epoch         int64  `json:"epoch"`
	KernelVersion string `json:"kernelVersion"`
	// Cmdline holds the spec's extra kernel parameters; whoever boots the
	// image adds the console and the agent's sbx.* parameters.
	Cmdline string `json:"cmdline"`
	// DiskSize is the root filesystem's size, the disk's virtual size.
	DiskSize int64 `json:"diskSize"`
	// Outputs are keyed by output name.
	Outputs map[string]ManifestOutput `json:"outputs"`
	// Packages and Executables are the image's inventory: the packages
	// installed from its package set, and the executables the build
	// checked, as the guest's /etc/sbx/image.json has them.
	Packages    []imageinfo.Package    `json:"packages,omitempty"`
	Executables []imageinfo.Executable `json:"executables,omitempty"`
}

// ManifestOutput is one output file of a build.
type ManifestOutput struct {
	// File is its name in the build's directory.
	File   string `json:"file"`
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

// ReadManifest reads an image.json.
func ReadManifest(path string) (*Manifest, error) {
	return readManifest(path)
}

func readManifest(path string) (*Manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if m.Version != ManifestVersion {
		return nil, fmt.Errorf("%s: manifest version %d, want %d", path, m.Version, ManifestVersion)
	}
	return &m, nil
}

func (m *Manifest) marshal() ([]byte, error) {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// result is the Result the manifest at path describes, with output paths
// beside it.
func (m *Manifest) result(path string) *Result {
	dir := filepath.Dir(path)
	r := &Result{
		Image:         m.Image,
		InputHash:     m.InputHash,
		BuildKey:      m.BuildKey,
		BaseKey:       m.BaseKey,
		ProvisionHash: m.ProvisionHash,
		Outputs:       map[string]Output{},
		Manifest:      path,
		KernelVersion: m.KernelVersion,
		DiskSize:      m.DiskSize,
		Packages:      m.Packages,
		Executables:   m.Executables,
	}
	for name, o := range m.Outputs {
		r.Outputs[name] = Output{Path: filepath.Join(dir, o.File), Digest: o.Digest, Size: o.Size}
	}
	return r
}

// manifest describes the staged outputs.
func (s *staged) manifest(b *build) *Manifest {
	m := &Manifest{
		Version:       ManifestVersion,
		Image:         b.img.Name,
		Platform:      b.img.Platform.String(),
		InputHash:     b.lock.InputHash,
		BuildKey:      b.key,
		FormatVersion: FormatVersion,
		Epoch:         b.opts.Epoch,
		KernelVersion: s.kernelVersion,
		Cmdline:       b.img.Kernel.Cmdline,
		DiskSize:      s.diskSize,
		Outputs:       map[string]ManifestOutput{},
		Packages:      s.packages,
		Executables:   s.executables,
	}
	for name, o := range s.outputs {
		m.Outputs[name] = ManifestOutput{File: outputFiles[name], Digest: o.Digest, Size: o.Size}
	}
	return m
}

// CopyTo copies the build's outputs and its manifest into dir (created if
// needed) under their names in the cache, each file atomically, and
// returns the Result for the copies. Copying stops with ctx's error once
// ctx ends.
func (r *Result) CopyTo(ctx context.Context, dir string) (*Result, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	out := *r
	out.Outputs = map[string]Output{}
	out.Cached = false
	for _, name := range sortedKeys(r.Outputs) {
		o := r.Outputs[name]
		dst := filepath.Join(dir, filepath.Base(o.Path))
		mode := os.FileMode(0o644)
		if name == OutputAgent {
			mode = 0o755
		}
		digest, n, err := copyVerified(ctx, dst, o.Path, mode)
		if err != nil {
			return nil, err
		}
		if digest != o.Digest || n != o.Size {
			return nil, fmt.Errorf("output %s at %s is %s (%d bytes), the build made %s (%d bytes)", name, o.Path, digest, n, o.Digest, o.Size)
		}
		out.Outputs[name] = Output{Path: dst, Digest: digest, Size: n}
	}
	out.Manifest = filepath.Join(dir, ManifestFile)
	if _, _, err := copyVerified(ctx, out.Manifest, r.Manifest, 0o644); err != nil {
		return nil, err
	}
	return &out, nil
}

// copyVerified copies src to dst atomically and returns the digest and
// size of what it copied.
func copyVerified(ctx context.Context, dst, src string, mode os.FileMode) (digest string, n int64, err error) {
	err = atomicfile.Write(dst, mode, func(f *os.File) error {
		var cerr error
		digest, n, cerr = copyHashed(ctx, f, src)
		return cerr
	})
	return digest, n, err
}
