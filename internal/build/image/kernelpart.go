package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sbx-dev/sbx/internal/build/kernel"
)

// The kernel and the initramfs depend on the kernel package, the modules
// asked for, the agent and the epoch, but not on the root filesystem. They
// are kept in the cache on their own as well, under a kernel key, so that
// changing an artifact, a user or a file rebuilds only the disk: reading a
// kernel package and its modules takes tens of seconds.

// kernelPartFile is the record of a cached kernel part, stored last.
const kernelPartFile = "kernel.json"

// kernelPart is kernel.json.
type kernelPart struct {
	KernelKey     string `json:"kernelKey"`
	KernelVersion string `json:"kernelVersion"`
	Kernel        Output `json:"kernel"`
	Initramfs     Output `json:"initramfs"`
}

// kernelKey is the sha256 over everything the kernel and initramfs bytes
// depend on.
func (b *build) kernelKey() string {
	kc := b.img.Kernel
	pin := b.lock.Inputs["kernel"]
	h := sha256.New()
	fmt.Fprintf(h, "sbx image kernel\nformat %d\n", FormatVersion)
	if pin != nil {
		fmt.Fprintf(h, "pin %q %q %q %q %q %q %q\n", pin.Kind, pin.Digest, pin.Manifest, pin.Version, pin.Integrity, pin.SHA256, pin.Filename)
	}
	fmt.Fprintf(h, "file %q\nmodules %q\ndefaults %q\nagent %s\nepoch %d\n",
		kc.File, strings.Join(kc.Modules, " "), strings.Join(kernel.DefaultModules, " "), b.agentSum, b.opts.Epoch)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// cachedKernel fills s with the cached kernel part, if it is whole.
func (b *build) cachedKernel(ctx context.Context, s *staged) bool {
	key := b.kernelKey()
	p, ok, err := b.cache.OutputPath(key, kernelPartFile)
	if err != nil || !ok {
		return false
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return false
	}
	var kp kernelPart
	if json.Unmarshal(data, &kp) != nil || kp.KernelKey != key || kp.KernelVersion == "" {
		return false
	}
	files := map[string]string{}
	for name, want := range map[string]Output{OutputKernel: kp.Kernel, OutputInitramfs: kp.Initramfs} {
		path, ok, err := b.cache.OutputPath(key, outputFiles[name])
		if err != nil || !ok {
			return false
		}
		got, n, err := hashFile(ctx, path)
		if err != nil || got != want.Digest || n != want.Size {
			return false
		}
		files[name] = path
	}
	for name, path := range files {
		s.files[name] = path
	}
	s.kernelVersion = kp.KernelVersion
	return true
}

// storeKernel puts the kernel part of s into the cache, its record last,
// and returns the paths it stored.
func (b *build) storeKernel(ctx context.Context, s *staged) ([]string, error) {
	key := b.kernelKey()
	kp := kernelPart{KernelKey: key, KernelVersion: s.kernelVersion}
	var stored []string
	for _, name := range []string{OutputKernel, OutputInitramfs} {
		p, digest, err := b.cache.PutOutput(ctx, key, outputFiles[name], copyFrom(s.files[name]))
		if err != nil {
			return stored, fmt.Errorf("image %q: storing the %s: %w", b.img.Name, name, err)
		}
		stored = append(stored, p)
		o := Output{Digest: digest, Size: s.outputs[name].Size}
		if digest != s.outputs[name].Digest {
			return stored, fmt.Errorf("image %q: output %s changed while it was stored", b.img.Name, name)
		}
		if name == OutputKernel {
			kp.Kernel = o
		} else {
			kp.Initramfs = o
		}
	}
	data, err := json.MarshalIndent(kp, "", "  ")
	if err != nil {
		return stored, err
	}
	p, _, err := b.cache.PutOutput(ctx, key, kernelPartFile, func(w io.Writer) error {
		_, err := io.Copy(w, bytes.NewReader(append(data, '\n')))
		return err
	})
	if err != nil {
		return stored, fmt.Errorf("image %q: storing the kernel record: %w", b.img.Name, err)
	}
	return append(stored, p), nil
}
