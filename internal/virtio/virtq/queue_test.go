//go:build linux

package virtq_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/sbx-dev/sbx/internal/virtio/virtq"
	"github.com/sbx-dev/sbx/internal/virtio/virtqtest"
)

const (
	memBase = 0x10000
	memSize = 1 << 20
)

// setup returns guest memory of one region, a driver over it and a
// queue over the same rings.
func setup(t *testing.T, size uint16, indirect bool, maxBytes uint64) (*virtq.Memory, *virtqtest.Driver, *virtq.Queue) {
	t.Helper()
	ram := make([]byte, memSize)
	mem, err := virtq.NewMemory(virtq.Region{GuestAddr: memBase, Data: ram})
	if err != nil {
		t.Fatal(err)
	}
	d := virtqtest.NewDriver(ram, virtqtest.Layout{Base: memBase, Size: size, Ring: memBase, Arena: memBase + 0x40000, AreaSize: 0x1000})
	q, err := virtq.New(mem, virtq.Config{Size: size, DescAddr: d.Desc, AvailAddr: d.Avail, UsedAddr: d.Used, Indirect: indirect, MaxChainBytes: maxBytes})
	if err != nil {
		t.Fatal(err)
	}
	return mem, d, q
}

func TestMemorySlice(t *testing.T) {
	a := make([]byte, 0x1000)
	b := make([]byte, 0x1000)
	mem, err := virtq.NewMemory(virtq.Region{GuestAddr: 0x3000, Data: b}, virtq.Region{GuestAddr: 0x1000, Data: a})
	if err != nil {
		t.Fatal(err)
	}
	a[0x10] = 7
	b[0xfff] = 9
	s, err := mem.Slice(0x1010, 4)
	if err != nil || len(s) != 4 || cap(s) != 4 || s[0] != 7 {
		t.Fatalf("Slice(0x1010, 4) = %v (cap %d), %v", s, cap(s), err)
	}
	if s, err := mem.Slice(0x3fff, 1); err != nil || s[0] != 9 {
		t.Fatalf("last byte of the second region: %v, %v", s, err)
	}
	if s, err := mem.Slice(math.MaxUint64, 0); err != nil || len(s) != 0 {
		t.Fatalf("empty range: %v, %v", s, err)
	}
	for _, c := range []struct{ addr, n uint64 }{
		{0, 1},                            // below every region
		{0x0fff, 2},                       // starts below a region
		{0x1fff, 2},                       // crosses a region's end
		{0x2000, 1},                       // in the hole
		{0x1000, 0x1001},                  // longer than the region
		{0x1010, math.MaxUint64},          // addr+len overflows
		{math.MaxUint64, 1},               // past everything
		{0x3000, math.MaxUint64 - 0x2fff}, // end wraps to 0
		{0x4000, 1},                       // just past the last region
	} {
		if s, err := mem.Slice(c.addr, c.n); !errors.Is(err, virtq.ErrOutOfBounds) {
			t.Errorf("Slice(%#x, %#x) = %d bytes, %v; want ErrOutOfBounds", c.addr, c.n, len(s), err)
		}
	}
}

func TestNewMemoryRefuses(t *testing.T) {
	for name, rs := range map[string][]virtq.Region{
		"empty":   {{GuestAddr: 0, Data: nil}},
		"overlap": {{GuestAddr: 0, Data: make([]byte, 0x2000)}, {GuestAddr: 0x1000, Data: make([]byte, 0x1000)}},
		"wraps":   {{GuestAddr: math.MaxUint64 - 0xff, Data: make([]byte, 0x101)}},
		"same":    {{GuestAddr: 0x1000, Data: make([]byte, 1)}, {GuestAddr: 0x1000, Data: make([]byte, 1)}},
	} {
		if _, err := virtq.NewMemory(rs...); err == nil {
			t.Errorf("%s: NewMemory accepted", name)
		}
	}
	if _, err := virtq.NewMemory(virtq.Region{GuestAddr: math.MaxUint64 - 0xff, Data: make([]byte, 0x100)}); err != nil {
		t.Errorf("a region ending at the top of the address space: %v", err)
	}
}

func TestNewRefuses(t *testing.T) {
	ram := make([]byte, 0x10000)
	mem, _ := virtq.NewMemory(virtq.Region{GuestAddr: 0, Data: ram})
	for _, c := range []virtq.Config{
		{Size: 0, DescAddr: 0, AvailAddr: 0x1000, UsedAddr: 0x2000},
		{Size: 3, DescAddr: 0, AvailAddr: 0x1000, UsedAddr: 0x2000},
		{Size: 65535, DescAddr: 0, AvailAddr: 0x1000, UsedAddr: 0x2000},
		{Size: 8, DescAddr: 8, AvailAddr: 0x1000, UsedAddr: 0x2000},
		{Size: 8, DescAddr: 0, AvailAddr: 0x1001, UsedAddr: 0x2000},
		{Size: 8, DescAddr: 0, AvailAddr: 0x1002, UsedAddr: 0x2000}, // not 4-aligned here
		{Size: 8, DescAddr: 0, AvailAddr: 0x1000, UsedAddr: 0x2002},
		{Size: 8, DescAddr: 0xfff0, AvailAddr: 0x1000, UsedAddr: 0x2000},
		{Size: 8, DescAddr: 0, AvailAddr: 0xfffc, UsedAddr: 0x2000},
		{Size: 8, DescAddr: 0, AvailAddr: 0x1000, UsedAddr: 0xffe0},
		{Size: 8192, DescAddr: 0, AvailAddr: 0x1000, UsedAddr: 0x2000}, // table past memory
	} {
		if _, err := virtq.New(mem, c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
}

// serve pops every available chain, writes the upper-cased readable
// bytes into its writable buffers and pushes it.
func serve(t *testing.T, q *virtq.Queue) int {
	t.Helper()
	n := 0
	for range 1 << 16 {
		c, err := q.Pop()
		if err != nil {
			t.Fatal(err)
		}
		if c == nil {
			return n
		}
		in := bytes.ToUpper(bytes.Join(c.Readable, nil))
		written := 0
		for _, w := range c.Writable {
			written += copy(w, in[written:])
		}
		if err := q.Push(c.Head, uint32(written)); err != nil {
			t.Fatal(err)
		}
		n++
	}
	t.Fatal("the queue never ran dry")
	return n
}

func TestRequests(t *testing.T) {
	for _, indirect := range []bool{false, true} {
		t.Run(fmt.Sprintf("indirect=%v", indirect), func(t *testing.T) {
			_, d, q := setup(t, 32, indirect, 1<<16)
			total := 0
			// Enough rounds to wrap the 16-bit indices several times over
			// a small ring.
			for round := range 300 {
				var want []string
				for i := range 1 + round%5 {
					msg := fmt.Sprintf("req-%d-%d", round, i)
					// two readable pieces, two writable ones
					out := [][]byte{[]byte(msg[:3]), []byte(msg[3:])}
					if _, err := d.Add(out, []uint32{4, 64}, indirect, true); err != nil {
						t.Fatal(err)
					}
					want = append(want, msg)
				}
				if got := serve(t, q); got != len(want) {
					t.Fatalf("round %d: served %d, want %d", round, got, len(want))
				}
				done, err := d.Completions()
				if err != nil {
					t.Fatal(err)
				}
				if len(done) != len(want) {
					t.Fatalf("round %d: %d completions, want %d", round, len(done), len(want))
				}
				for i, c := range done {
					if string(c.Data) != string(bytes.ToUpper([]byte(want[i]))) {
						t.Fatalf("round %d: completion %d holds %q, want %q", round, i, c.Data, bytes.ToUpper([]byte(want[i])))
					}
				}
				total += len(want)
			}
			if q.LastAvail() != uint16(total) || q.UsedIdx() != uint16(total) {
				t.Fatalf("indices %d/%d after %d requests", q.LastAvail(), q.UsedIdx(), total)
			}
		})
	}
}

func TestResumeFromLastAvail(t *testing.T) {
	ram := make([]byte, memSize)
	mem, _ := virtq.NewMemory(virtq.Region{GuestAddr: memBase, Data: ram})
	d := virtqtest.NewDriver(ram, virtqtest.Layout{Base: memBase, Size: 8, Ring: memBase, Arena: memBase + 0x40000, AreaSize: 0x1000})
	// The driver's indices stand at 65533, as after a restore.
	d.Resume(65533)
	q, err := virtq.New(mem, virtq.Config{Size: 8, DescAddr: d.Desc, AvailAddr: d.Avail, UsedAddr: d.Used, LastAvail: 65533, MaxChainBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if _, err := d.Add([][]byte{[]byte("x")}, []uint32{1}, false, true); err != nil {
			t.Fatal(err)
		}
		if n := serve(t, q); n != 1 {
			t.Fatalf("request %d: served %d", i, n)
		}
		if done, err := d.Completions(); err != nil || len(done) != 1 || string(done[0].Data) != "X" {
			t.Fatalf("request %d: completions %+v, %v", i, done, err)
		}
	}
	if q.LastAvail() != 3 || d.UsedIdx() != 3 {
		t.Fatalf("indices after wrapping: last avail %d, used %d", q.LastAvail(), d.UsedIdx())
	}
}

func TestNeedNotify(t *testing.T) {
	_, d, q := setup(t, 8, false, 4096)
	if _, err := d.Add([][]byte{[]byte("a")}, nil, false, true); err != nil {
		t.Fatal(err)
	}
	serve(t, q)
	if !q.NeedNotify() {
		t.Fatal("NeedNotify is false with the flag clear")
	}
	d.SetNoInterrupt(true)
	if q.NeedNotify() {
		t.Fatal("NeedNotify is true with VIRTQ_AVAIL_F_NO_INTERRUPT set")
	}
}

func TestPushRefusesBadHead(t *testing.T) {
	_, _, q := setup(t, 8, false, 4096)
	if err := q.Push(8, 0); err == nil {
		t.Fatal("Push accepted head 8 in a queue of 8")
	}
}

func TestMaxChainBytes(t *testing.T) {
	_, d, q := setup(t, 8, true, 100)
	if _, err := d.Add([][]byte{make([]byte, 60)}, []uint32{40}, false, true); err != nil {
		t.Fatal(err)
	}
	if serve(t, q) != 1 {
		t.Fatal("a chain of exactly the limit was not served")
	}
	if _, err := d.Add([][]byte{make([]byte, 60)}, []uint32{41}, true, true); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Pop(); !errors.Is(err, virtq.ErrMalformed) {
		t.Fatalf("a chain over the limit: %v", err)
	}
}

// TestHostileRings writes broken rings and checks Pop refuses each.
func TestHostileRings(t *testing.T) {
	const size = 8
	buf := uint64(memBase + 0x40000)
	table := uint64(memBase + 0x80000)
	end := uint64(memBase + memSize)
	cases := []struct {
		name  string
		write func(d *virtqtest.Driver)
	}{
		{"head index past size", func(d *virtqtest.Driver) {
			d.SetAvailEntry(0, size)
			d.SetAvailIdx(1)
		}},
		{"next index past size", func(d *virtqtest.Driver) {
			d.SetDesc(d.Desc, 0, buf, 8, virtq.DescFNext, size)
			d.SetAvailIdx(1)
		}},
		{"loop", func(d *virtqtest.Driver) {
			d.SetDesc(d.Desc, 0, buf, 8, virtq.DescFNext, 1)
			d.SetDesc(d.Desc, 1, buf, 8, virtq.DescFNext, 0)
			d.SetAvailIdx(1)
		}},
		{"self loop", func(d *virtqtest.Driver) {
			d.SetDesc(d.Desc, 3, buf, 0, virtq.DescFNext, 3)
			d.SetAvailEntry(0, 3)
			d.SetAvailIdx(1)
		}},
		{"buffer outside memory", func(d *virtqtest.Driver) {
			d.SetDesc(d.Desc, 0, 0x10, 8, 0, 0)
			d.SetAvailIdx(1)
		}},
		{"buffer crossing the region's end", func(d *virtqtest.Driver) {
			d.SetDesc(d.Desc, 0, end-4, 8, virtq.DescFWrite, 0)
			d.SetAvailIdx(1)
		}},
		{"address plus length overflows", func(d *virtqtest.Driver) {
			d.SetDesc(d.Desc, 0, math.MaxUint64-3, 8, 0, 0)
			d.SetAvailIdx(1)
		}},
		{"readable after writable", func(d *virtqtest.Driver) {
			d.SetDesc(d.Desc, 0, buf, 8, virtq.DescFWrite|virtq.DescFNext, 1)
			d.SetDesc(d.Desc, 1, buf, 8, 0, 0)
			d.SetAvailIdx(1)
		}},
		{"readable after writable in an indirect table", func(d *virtqtest.Driver) {
			d.SetDesc(table, 0, buf, 8, virtq.DescFWrite|virtq.DescFNext, 1)
			d.SetDesc(table, 1, buf, 8, 0, 0)
			d.SetDesc(d.Desc, 0, table, 32, virtq.DescFIndirect, 0)
			d.SetAvailIdx(1)
		}},
		{"nested indirect", func(d *virtqtest.Driver) {
			d.SetDesc(table, 0, table+0x100, 16, virtq.DescFIndirect, 0)
			d.SetDesc(table+0x100, 0, buf, 8, 0, 0)
			d.SetDesc(d.Desc, 0, table, 16, virtq.DescFIndirect, 0)
			d.SetAvailIdx(1)
		}},
		{"indirect table of bad length", func(d *virtqtest.Driver) {
			d.SetDesc(table, 0, buf, 8, 0, 0)
			d.SetDesc(d.Desc, 0, table, 24, virtq.DescFIndirect, 0)
			d.SetAvailIdx(1)
		}},
		{"indirect table of zero length", func(d *virtqtest.Driver) {
			d.SetDesc(d.Desc, 0, table, 0, virtq.DescFIndirect, 0)
			d.SetAvailIdx(1)
		}},
		{"indirect table longer than the queue", func(d *virtqtest.Driver) {
			d.SetDesc(d.Desc, 0, table, 16*(size+1), virtq.DescFIndirect, 0)
			d.SetAvailIdx(1)
		}},
		{"indirect table outside memory", func(d *virtqtest.Driver) {
			d.SetDesc(d.Desc, 0, end-16, 32, virtq.DescFIndirect, 0)
			d.SetAvailIdx(1)
		}},
		{"indirect with next", func(d *virtqtest.Driver) {
			d.SetDesc(table, 0, buf, 8, 0, 0)
			d.SetDesc(d.Desc, 0, table, 16, virtq.DescFIndirect|virtq.DescFNext, 1)
			d.SetDesc(d.Desc, 1, buf, 8, 0, 0)
			d.SetAvailIdx(1)
		}},
		{"indirect after the head", func(d *virtqtest.Driver) {
			d.SetDesc(table, 0, buf, 8, 0, 0)
			d.SetDesc(d.Desc, 0, buf, 8, virtq.DescFNext, 1)
			d.SetDesc(d.Desc, 1, table, 16, virtq.DescFIndirect, 0)
			d.SetAvailIdx(1)
		}},
		{"loop in an indirect table", func(d *virtqtest.Driver) {
			d.SetDesc(table, 0, buf, 8, virtq.DescFNext, 1)
			d.SetDesc(table, 1, buf, 8, virtq.DescFNext, 0)
			d.SetDesc(d.Desc, 0, table, 32, virtq.DescFIndirect, 0)
			d.SetAvailIdx(1)
		}},
		{"next past an indirect table", func(d *virtqtest.Driver) {
			d.SetDesc(table, 0, buf, 8, virtq.DescFNext, 2)
			d.SetDesc(d.Desc, 0, table, 32, virtq.DescFIndirect, 0)
			d.SetAvailIdx(1)
		}},
		{"available index jumps past size", func(d *virtqtest.Driver) {
			d.SetDesc(d.Desc, 0, buf, 8, 0, 0)
			d.SetAvailIdx(size + 1)
		}},
		{"available index moves backwards", func(d *virtqtest.Driver) {
			d.SetDesc(d.Desc, 0, buf, 8, 0, 0)
			d.SetAvailIdx(0xffff)
		}},
		{"chain over the byte limit", func(d *virtqtest.Driver) {
			d.SetDesc(d.Desc, 0, memBase, memSize, 0, 0)
			d.SetAvailIdx(1)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, d, q := setup(t, size, true, 1<<16)
			c.write(d)
			ch, err := q.Pop()
			if !errors.Is(err, virtq.ErrMalformed) {
				t.Fatalf("Pop = %+v, %v; want ErrMalformed", ch, err)
			}
			if q.LastAvail() != 0 {
				t.Fatalf("a refused entry was consumed: last avail %d", q.LastAvail())
			}
		})
	}
}

func TestIndirectNotNegotiated(t *testing.T) {
	_, d, q := setup(t, 8, false, 4096)
	if _, err := d.Add([][]byte{[]byte("a")}, []uint32{1}, true, true); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Pop(); !errors.Is(err, virtq.ErrMalformed) {
		t.Fatalf("an indirect chain without the feature: %v", err)
	}
}

// TestChainOfQueueSize checks that a chain of exactly Size descriptors is
// served and that its buffers come back in order.
func TestChainOfQueueSize(t *testing.T) {
	const size = 8
	_, d, q := setup(t, size, false, 4096)
	var out [][]byte
	for i := range size - 1 {
		out = append(out, []byte{byte('a' + i)})
	}
	if _, err := d.Add(out, []uint32{16}, false, true); err != nil {
		t.Fatal(err)
	}
	c, err := q.Pop()
	if err != nil || c == nil {
		t.Fatalf("Pop = %v, %v", c, err)
	}
	if got := string(bytes.Join(c.Readable, nil)); got != "abcdefg" || len(c.Writable) != 1 || len(c.Writable[0]) != 16 {
		t.Fatalf("chain: readable %q, %d writable", got, len(c.Writable))
	}
}
