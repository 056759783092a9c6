package pipeline

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sbx-dev/sbx/internal/build/agentbin"
	"github.com/sbx-dev/sbx/internal/build/cache"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/build/provision"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/lang"
)

// ImageOptions are the options every build of the configuration in dir
// uses, read from env: the cache ($SBX_CACHE_DIR, else cache.DefaultRoot),
// the epoch ($SOURCE_DATE_EPOCH, 0 when unset), the guest agent
// ($SBX_GUEST_AGENT, else beside the running executable) and fetching
// with env's clients and keychain, and provision steps run by a
// provision.Provisioner with sandbox's defaults. Callers may set the progress
// callbacks and Verify on the result.
func ImageOptions(dir string, env Env) (image.Options, error) {
	var opts image.Options
	root, err := cacheRoot(env)
	if err != nil {
		return opts, err
	}
	c, err := cache.Open(root)
	if err != nil {
		return opts, fmt.Errorf("cannot open the cache: %w", err)
	}
	opts.Cache = c
	if opts.Epoch, err = Epoch(env); err != nil {
		return opts, err
	}
	search := agentbin.Search{}
	search.Env, _ = env.Getenv(agentbin.EnvVar)
	if exe, err := os.Executable(); err == nil {
		search.ExeDir = filepath.Dir(exe)
	}
	opts.Agent = search.Find
	opts.Fetch = env.fetchOptions(dir)
	// Provision steps boot the image in a sandbox of its own: no
	// mounts, no secrets, each step's egress rules only.
	opts.Provision = &provision.Provisioner{}
	return opts, nil
}

// Epoch is $SOURCE_DATE_EPOCH in env, 0 when it is unset or empty. It
// must be a whole number of seconds from 0 to 2^32-1: the newc cpio
// format of the initramfs has 32-bit times.
func Epoch(env Env) (int64, error) {
	s, _ := env.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return 0, nil
	}
	epoch, err := strconv.ParseInt(s, 10, 64)
	if err != nil || epoch < 0 || epoch > math.MaxUint32 {
		return 0, fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a number of seconds since 1970 (0 to %d)", s, uint32(math.MaxUint32))
	}
	return epoch, nil
}

// Build builds the image named name (with or without "image.") of cfg
// as lock pins it, or finds it in the cache, with opts from ImageOptions.
// It does not record the output hashes in the lock file.
func Build(ctx context.Context, cfg *lang.Config, lock *lockfiles.Lock, name string, opts image.Options) (*image.Result, error) {
	img, err := Image(cfg, name)
	if err != nil {
		return nil, err
	}
	return image.Build(ctx, img, lock.Lookup(img.Name), opts)
}

// Image returns the image block named name ("image.NAME" or NAME) of
// cfg; the error lists the images there are.
func Image(cfg *lang.Config, name string) (*lang.Image, error) {
	img, ok := cfg.Images[strings.TrimPrefix(name, "image.")]
	if !ok {
		return nil, fmt.Errorf("no image %q in the configuration in %s (images: %s)", name, cfg.Dir, names(cfg.Images))
	}
	return img, nil
}

// Sandbox returns the sandbox block named name ("sandbox.NAME" or
// NAME) of cfg; the error lists the sandboxes there are.
func Sandbox(cfg *lang.Config, name string) (*lang.Sandbox, error) {
	sb, ok := cfg.Sandboxes[strings.TrimPrefix(name, "sandbox.")]
	if !ok {
		return nil, fmt.Errorf("no sandbox %q in the configuration in %s (sandboxes: %s)", name, cfg.Dir, names(cfg.Sandboxes))
	}
	return sb, nil
}

func names[V any](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}

// cacheRoot is the cache's root directory: $SBX_CACHE_DIR, else
// cache.DefaultRoot.
func cacheRoot(env Env) (string, error) {
	root, _ := env.Getenv(cache.EnvRoot)
	if root == "" {
		var err error
		if root, err = cache.DefaultRoot(); err != nil {
			return "", fmt.Errorf("cannot find the cache directory: %w; set %s to a directory", err, cache.EnvRoot)
		}
	}
	return root, nil
}

// SnapshotDir is where the machines saved for warm starts are kept: the
// directory "snapshots" in the cache's root (cacheRoot).
func SnapshotDir(env Env) (string, error) {
	root, err := cacheRoot(env)
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "snapshots"), nil
}
