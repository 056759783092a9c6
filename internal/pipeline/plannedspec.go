package pipeline

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/recipe"
	"github.com/sbx-dev/sbx/internal/sandbox"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxfs"
	"github.com/sbx-dev/sbx/internal/state"
)

// PlannedSpec is what starts the sandbox a plan resolved: r is the
// sandbox's desired resource (a plan change's After, from plan.Desired),
// configDir the configuration directory the plan was made in, and img
// the image built for the image hash r records. Everything in the spec
// but the configuration directory, the mounts' host directories made
// absolute against it (with the checks Mounts makes) and the image's
// files comes from r: the name, CPUs and memory, the policy, the mounts'
// owners as numbers, the user, and the image's then the sandbox's
// environment. It is SandboxSpec's spec for the configuration r was
// planned from (a test over the examples checks).
//
// An image built for another input hash than r's, a resource that
// records no owner for one of its policy's mounts (a record of an older
// sbx: plan again) and an image whose manifest cannot be read are
// errors.
func PlannedSpec(configDir string, r *state.Resource, img *image.Result) (sandbox.Spec, error) {
	if r == nil || r.Sandbox == nil {
		return sandbox.Spec{}, errors.New("the plan has no sandbox to start")
	}
	a := r.Sandbox
	name := r.Addr.Name
	if img == nil || recipe.ImageHash(img.InputHash, img.ProvisionHash) != a.ImageHash {
		got := "none"
		if img != nil {
			got = recipe.ImageHash(img.InputHash, img.ProvisionHash)
		}
		return sandbox.Spec{}, fmt.Errorf("sandbox.%s: the plan starts image.%s with image hash %s, but the image built has %s", name, a.Image, a.ImageHash, got)
	}
	mounts, err := plannedMounts(configDir, a)
	if err != nil {
		return sandbox.Spec{}, fmt.Errorf("sandbox.%s: %w", name, err)
	}
	si, err := SandboxImage(img)
	if err != nil {
		return sandbox.Spec{}, fmt.Errorf("sandbox.%s: %w", name, err)
	}
	return sandbox.Spec{
		Policy:    a.Policy,
		Mounts:    mounts,
		Name:      name,
		ConfigDir: configDir,
		Image:     si,
		CPUs:      a.CPUs,
		Memory:    a.Memory,
		User:      a.User,
		Env:       commandEnv(a.ImageEnv, a.Env),
	}, nil
}

// plannedMounts returns the workspace mounts of a as a started sandbox
// serves them, in the policy's order, as Mounts does from the
// configuration.
func plannedMounts(configDir string, a *state.SandboxAttrs) ([]sandboxfs.Mount, error) {
	var out []sandboxfs.Mount
	for i, m := range a.Policy.Mounts {
		if i >= len(a.Mounts) || a.Mounts[i].Guest != m.Guest {
			return nil, fmt.Errorf("mount %s%s: the plan records no owner for it; plan again", m.Guest, origin(m.Origin))
		}
		host, err := hostDir(configDir, m.Host)
		if err != nil {
			return nil, fmt.Errorf("mount %s%s: %w", m.Guest, origin(m.Origin), err)
		}
		out = append(out, sandboxfs.Mount{Policy: m, HostDir: host, UID: a.Mounts[i].UID, GID: a.Mounts[i].GID})
	}
	if len(a.Mounts) > len(a.Policy.Mounts) {
		return nil, fmt.Errorf("the plan records owners of %d mounts, but its policy has %d", len(a.Mounts), len(a.Policy.Mounts))
	}
	return out, nil
}

// commandEnv is "KEY=value" of the image's environment, then of the
// sandbox's, each sorted by key, as lang.Config.CommandEnv orders them.
func commandEnv(imageEnv, env map[string]string) []string {
	var out []string
	for _, m := range []map[string]string{imageEnv, env} {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out = append(out, k+"="+m[k])
		}
	}
	return out
}
