package ext4

import (
	"encoding/binary"
	"fmt"
)

// addJournal makes inode 8 an empty internal jbd2 journal of
// opts.JournalBlocks blocks, placed at the start of the data area.
func (b *builder) addJournal(t timestamp) error {
	n := &inode{mode: sIFREG | 0o600, links: 1, time: t, name: "journal", ino: journalIno}
	b.inodes[journalIno-1] = n
	nblocks := uint64(b.opts.JournalBlocks)
	n.size = nblocks * blockSize
	runs, ok := b.al.alloc(nblocks)
	if !ok {
		return nil // Build reports the image too small when the stream ends
	}
	if !b.zeroed {
		zero := make([]byte, 1<<20)
		for _, r := range runs {
			for pos, end := int64(r.start)*blockSize, int64(r.start+r.len)*blockSize; pos < end; pos += int64(len(zero)) {
				if _, err := b.w.WriteAt(zero[:min(int64(len(zero)), end-pos)], pos); err != nil {
					return fmt.Errorf("ext4: writing the journal: %w", err)
				}
			}
		}
	}
	// The jbd2 superblock is big-endian. s_start 0 marks the log empty.
	be := binary.BigEndian
	sb := make([]byte, blockSize)
	be.PutUint32(sb[0:], 0xC03B3998) // magic
	be.PutUint32(sb[4:], 4)          // superblock version 2
	be.PutUint32(sb[12:], blockSize)
	be.PutUint32(sb[16:], uint32(nblocks)) // s_maxlen
	be.PutUint32(sb[20:], 1)               // s_first: the log follows this block
	be.PutUint32(sb[24:], 1)               // s_sequence
	uuid := uuidFromSeed(b.opts.Seed)
	copy(sb[48:64], uuid[:])
	be.PutUint32(sb[64:], 1) // s_nr_users
	if err := b.writeBlocks(runs[0].start, sb); err != nil {
		return err
	}
	return b.setExtents(n, runs)
}
