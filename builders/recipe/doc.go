// Package recipe defines an image's recipe: the ordered list of its inputs
// (base, kernel, artifacts) and the input hash over everything that affects
// the image's bytes — every pin, platform, size, and each artifact's path,
// mode, uid and gid, users, files and environment. Two images with the same
// input hash build to the same bytes.
//
// The lock records the hash (package lockfiles); plan compares it; the
// builders key their outputs by it.
package recipe
