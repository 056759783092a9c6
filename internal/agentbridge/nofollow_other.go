//go:build !unix

package agentbridge

// noFollow: os.Root already refuses links that leave the root; the last
// name is checked with Lstat before the open.
const noFollow = 0

const nonBlock = 0
