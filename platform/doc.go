// Package platform holds Platform, the operating system and CPU
// architecture an image is built for and a machine runs. It is its own
// package so that the packages that boot machines and build the guest
// agent need not import the spec language (package lang), which names
// platforms in image blocks.
package platform
