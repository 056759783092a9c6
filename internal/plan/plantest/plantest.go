package plantest

import (
	"fmt"
	"strings"

	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/recipe"
	"github.com/sbx-dev/sbx/lang"
)

// Lock returns a lock of every image of cfg whose pins are the source
// strings themselves (as versions) with their declared sha256, and an
// image's package set its list of requests. An image whose input hash
// cannot be computed is an error.
func Lock(cfg *lang.Config) (*lockfiles.Lock, error) {
	l := &lockfiles.Lock{Images: map[string]*lockfiles.Image{}}
	for name, img := range cfg.Images {
		pins := map[string]*lockfiles.Pin{}
		for _, in := range recipe.Inputs(img) {
			if in.Source != nil {
				pins[in.Key] = &lockfiles.Pin{Source: in.Source.Raw, Kind: string(in.Source.Kind), Version: in.Source.Raw, SHA256: in.Source.SHA256}
			}
		}
		if reqs := img.Packages.Requests; len(reqs) > 0 {
			want := strings.Join(reqs, ", ")
			pins[lockfiles.PackagesKey] = &lockfiles.Pin{Source: want, Kind: lockfiles.KindDebPackages, Version: want}
		}
		hash, err := recipe.InputHash(img, pins)
		if err != nil {
			return nil, fmt.Errorf("image.%s: %v", name, err)
		}
		l.Images[name] = &lockfiles.Image{Name: name, Platform: img.Platform.String(), InputHash: hash, Inputs: pins}
	}
	return l, nil
}
