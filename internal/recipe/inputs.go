package recipe

import "github.com/sbx-dev/sbx/lang"

// Input is one source an image needs, under the key the lock files it by.
type Input struct {
	// Key is "base", "kernel" or "artifact.NAME".
	Key    string
	Source *lang.Source
}

// Inputs lists the sources of img in a fixed order: base, kernel, then
// artifacts in declaration order.
func Inputs(img *lang.Image) []Input {
	var in []Input
	if img.Base != nil {
		in = append(in, Input{Key: "base", Source: img.Base})
	}
	if img.Kernel != nil && img.Kernel.Source != nil {
		in = append(in, Input{Key: "kernel", Source: img.Kernel.Source})
	}
	for _, a := range img.Artifacts {
		in = append(in, Input{Key: "artifact." + a.Name, Source: a.Source})
	}
	return in
}
