package agentproto

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"
)

func TestCreditBlocksAtZero(t *testing.T) {
	c := NewCredit()
	n, err := c.Wait(context.Background())
	if err != nil || n != InitialWindow {
		t.Fatalf("Wait = %d, %v; want %d", n, err, InitialWindow)
	}
	c.Spend(n)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait without credit = %v, want a timeout", err)
	}
	got := make(chan int)
	go func() {
		n, _ := c.Wait(context.Background())
		got <- n
	}()
	time.Sleep(10 * time.Millisecond)
	c.Add(100)
	if n := <-got; n != 100 {
		t.Errorf("after Add(100), Wait = %d", n)
	}
	c.Close(io.ErrClosedPipe)
	if _, err := c.Wait(context.Background()); err != io.ErrClosedPipe {
		t.Errorf("after Close, Wait = %v", err)
	}
	if err := c.Add(maxCredit); err == nil {
		t.Error("credit overflow accepted")
	}
}

func TestInboxRefusesOverrun(t *testing.T) {
	in := NewInbox(nil)
	if err := in.Push(make([]byte, InitialWindow)); err != nil {
		t.Fatal(err)
	}
	if err := in.Push([]byte{1}); !errors.Is(err, ErrWindow) {
		t.Errorf("push past the window = %v, want ErrWindow", err)
	}
}

// TestInboxGrants runs a sender and a receiver that follow the protocol,
// with a slow consumer, and checks every byte arrives in order while the
// receiver never holds more than the window.
func TestInboxGrants(t *testing.T) {
	credit := NewCredit()
	var granted sync.Mutex
	total := 0
	in := NewInbox(func(n uint32) {
		granted.Lock()
		total += int(n)
		granted.Unlock()
		credit.Add(n)
	})
	want := make([]byte, 3*InitialWindow+12345)
	for i := range want {
		want[i] = byte(i * 7)
	}
	go func() {
		rest := want
		for len(rest) > 0 {
			n, err := credit.Wait(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			n = min(n, MaxData, len(rest))
			credit.Spend(n)
			if err := in.Push(rest[:n:n]); err != nil {
				t.Error(err)
				return
			}
			rest = rest[n:]
		}
		in.CloseWrite(nil)
	}()
	var got bytes.Buffer
	buf := make([]byte, 1000)
	for {
		n, err := in.Read(buf)
		got.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if got.Len()%50000 < 1000 {
			time.Sleep(time.Millisecond)
		}
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatal("the bytes read differ from those pushed")
	}
	if hw := in.HighWater(); hw > InitialWindow || hw == 0 {
		t.Errorf("high water %d, want in (0, %d]", hw, InitialWindow)
	}
	granted.Lock()
	defer granted.Unlock()
	if total < len(want)-InitialWindow {
		t.Errorf("granted %d bytes for %d read", total, len(want))
	}
}

func TestInboxAbortReturnsCredit(t *testing.T) {
	var granted uint32
	in := NewInbox(func(n uint32) { granted += n })
	in.Push(make([]byte, 1000))
	in.Abort(io.ErrClosedPipe)
	if granted != 1000 {
		t.Errorf("abort granted %d, want 1000", granted)
	}
	in.Push(make([]byte, 500))
	if granted != 1500 {
		t.Errorf("push after abort granted %d in total, want 1500", granted)
	}
	if _, err := in.Read(make([]byte, 10)); err != io.ErrClosedPipe {
		t.Errorf("read after abort = %v", err)
	}
}

func TestInboxCloseWithError(t *testing.T) {
	in := NewInbox(nil)
	in.Push([]byte("abc"))
	in.CloseWrite(io.ErrUnexpectedEOF)
	var out bytes.Buffer
	n, err := in.WriteTo(&out)
	if n != 3 || out.String() != "abc" || err != io.ErrUnexpectedEOF {
		t.Errorf("WriteTo = %d, %v, %q", n, err, out.String())
	}
}
