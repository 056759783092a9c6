//go:build linux

package vhostuser

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"testing"
	"time"
)

// request encodes one request for seeds.
func request(req, flags uint32, payload []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, req)
	b = binary.LittleEndian.AppendUint32(b, flagVersion|flags)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

// FuzzServe feeds an arbitrary byte stream to Serve as the front-end's
// requests (no descriptors can come with them). Serve must not panic and
// must return once the stream ends.
func FuzzServe(f *testing.F) {
	var realize []byte
	for _, r := range [][]byte{
		request(reqGetFeatures, 0, nil),
		request(reqGetProtocolFeatures, 0, nil),
		request(reqSetProtocolFeatures, 0, u64Payload(offeredProtocolFeatures)),
		request(reqGetQueueNum, 0, nil),
		request(reqSetOwner, 0, nil),
		request(reqSetFeatures, flagNeedReply, u64Payload(FeatureVersion1|FeatureProtocolFeatures)),
		request(reqSetVringNum, flagNeedReply, state(1, 128)),
		request(reqSetVringBase, flagNeedReply, state(1, 7)),
		request(reqSetVringAddr, flagNeedReply, vringAddrPayload(1, 0x1000, 0x3000, 0x2000)),
		request(reqSetVringCall, 0, fileIndex(1, true)),
		request(reqSetVringErr, 0, fileIndex(0, true)),
		request(reqSetVringEnable, flagNeedReply, state(1, 1)),
		request(reqGetVringBase, 0, state(1, 0)),
		request(reqResetOwner, 0, nil),
	} {
		f.Add(r)
		realize = append(realize, r...)
	}
	f.Add(realize)
	f.Add(request(reqSetMemTable, flagNeedReply, memTable(memRegion{size: 4096})))
	f.Add(request(reqSetVringKick, 0, fileIndex(0, false)))
	f.Add(request(77, 0, make([]byte, 12)))
	f.Add([]byte{1, 0, 0})
	log := slog.New(slog.DiscardHandler)
	f.Fuzz(func(t *testing.T, stream []byte) {
		a, b := unixPair(t)
		go io.Copy(io.Discard, b)
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- Serve(ctx, a, &upper{}, Options{Logger: log}) }()
		b.Write(stream)
		b.CloseWrite()
		select {
		case <-done:
		case <-time.After(2 * waitLimit):
			t.Fatal("Serve did not return after the stream ended")
		}
		if ctx.Err() != nil {
			t.Fatal("Serve only returned when its context ended")
		}
	})
}

// FuzzDecode runs the payload decoders on arbitrary payloads: they must
// not panic, and what they accept must keep to the bounds.
func FuzzDecode(f *testing.F) {
	f.Add(uint32(reqSetMemTable), memTable(memRegion{guestAddr: 0, size: 4096, userAddr: 1 << 40}))
	f.Add(uint32(reqSetVringAddr), vringAddrPayload(1, 1, 2, 3))
	f.Add(uint32(reqSetVringNum), state(0, 256))
	f.Add(uint32(reqSetFeatures), u64Payload(1))
	f.Fuzz(func(t *testing.T, req uint32, payload []byte) {
		if len(payload) > maxPayload {
			return
		}
		m := &message{req: req, flags: flagVersion, payload: payload}
		if rs, err := decodeMemTable(m); err == nil && (len(rs) == 0 || len(rs) > maxRegions) {
			t.Fatalf("%d regions accepted", len(rs))
		}
		decodeVringAddr(m)
		decodeVringState(m)
		decodeU64(m)
		var h [headerSize]byte
		copy(h[:], payload)
		if _, _, size, err := decodeHeader(h[:]); err == nil && size > maxPayload {
			t.Fatalf("header with payload of %d accepted", size)
		}
	})
}

// FuzzServeWithFDs splits the stream into requests at the lengths their
// headers claim and sends each with the descriptors its type calls for:
// the guest RAM memfd with a memory table (as many as the table counts,
// up to one too many), an eventfd with a kick, call or error request
// unless it sets the no-fd bit. So memory gets mapped and queues start
// on whatever ring addresses the input names, and the queues then walk
// the guest memory the input's rings point at.
func FuzzServeWithFDs(f *testing.F) {
	table := memTable(memRegion{guestAddr: 0, size: ramSize, userAddr: userBase})
	var start []byte
	for _, r := range [][]byte{
		request(reqSetProtocolFeatures, 0, u64Payload(offeredProtocolFeatures)),
		request(reqSetFeatures, 0, u64Payload(FeatureVersion1|FeatureIndirectDesc)),
		request(reqSetMemTable, flagNeedReply, table),
		request(reqSetVringNum, 0, state(1, 64)),
		request(reqSetVringAddr, 0, vringAddrPayload(1, userBase, userBase+0x800, userBase+0x400)),
		request(reqSetVringKick, 0, fileIndex(1, false)),
		request(reqSetVringCall, 0, fileIndex(1, false)),
		request(reqGetVringBase, 0, state(1, 0)),
		request(reqSetMemTable, 0, table),
		request(reqResetOwner, 0, nil),
	} {
		start = append(start, r...)
	}
	f.Add(start, []byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0})
	log := slog.New(slog.DiscardHandler)
	f.Fuzz(func(t *testing.T, stream, ram []byte) {
		memfd, err := unixMemfd(ramSize)
		if err != nil {
			t.Fatal(err)
		}
		defer closeFD(memfd)
		// The input's second half is the start of guest memory: rings
		// and descriptors for the queues it starts.
		if len(ram) > 0 {
			if _, err := pwrite(memfd, ram); err != nil {
				t.Fatal(err)
			}
		}
		ev := eventfd(t)
		a, b := unixPair(t)
		go io.Copy(io.Discard, b)
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- Serve(ctx, a, &upper{}, Options{Logger: log, MaxChainBytes: 1 << 16}) }()
		for len(stream) >= headerSize {
			size := int(binary.LittleEndian.Uint32(stream[8:]))
			n := min(len(stream), headerSize+min(size, maxPayload+1))
			msg := stream[:n]
			stream = stream[n:]
			var fds []int
			switch req := binary.LittleEndian.Uint32(msg); req {
			case reqSetMemTable:
				if len(msg) >= headerSize+4 {
					for range min(binary.LittleEndian.Uint32(msg[headerSize:]), maxRegions+1) {
						fds = append(fds, memfd)
					}
				}
			case reqSetVringKick, reqSetVringCall, reqSetVringErr:
				if len(msg) < headerSize+8 || binary.LittleEndian.Uint64(msg[headerSize:])&vringNoFDMask == 0 {
					fds = append(fds, ev)
				}
			}
			signal(ev) // a kick for whatever queue runs
			if _, _, err := b.WriteMsgUnix(msg, rightsOf(fds), nil); err != nil {
				break
			}
		}
		b.Write(stream)
		b.CloseWrite()
		select {
		case <-done:
		case <-time.After(2 * waitLimit):
			t.Fatal("Serve did not return after the stream ended")
		}
		if ctx.Err() != nil {
			t.Fatal("Serve only returned when its context ended")
		}
	})
}
