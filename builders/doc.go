// Package builders groups the image-building subpackages: recipe (an
// image's inputs and input hash), resolve (pinning those inputs for the
// lock), and the packages that fetch, unpack and assemble images from
// the pins.
package builders
