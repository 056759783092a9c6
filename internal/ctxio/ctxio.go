package ctxio

import (
	"context"
	"io"
)

// Reader returns a reader of r whose every Read first returns ctx's
// error if ctx is done.
func Reader(ctx context.Context, r io.Reader) io.Reader {
	return &reader{ctx: ctx, r: r}
}

type reader struct {
	ctx context.Context
	r   io.Reader
}

func (r *reader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

// Writer returns a writer to w whose every Write first returns ctx's
// error if ctx is done.
func Writer(ctx context.Context, w io.Writer) io.Writer {
	return &writer{ctx: ctx, w: w}
}

type writer struct {
	ctx context.Context
	w   io.Writer
}

func (w *writer) Write(p []byte) (int, error) {
	if err := w.ctx.Err(); err != nil {
		return 0, err
	}
	return w.w.Write(p)
}

// WriterAt returns a WriterAt to w whose every WriteAt first returns
// ctx's error if ctx is done.
func WriterAt(ctx context.Context, w io.WriterAt) io.WriterAt {
	return &writerAt{ctx: ctx, w: w}
}

type writerAt struct {
	ctx context.Context
	w   io.WriterAt
}

func (w *writerAt) WriteAt(p []byte, off int64) (int, error) {
	if err := w.ctx.Err(); err != nil {
		return 0, err
	}
	return w.w.WriteAt(p, off)
}

// ReaderAt returns a ReaderAt of r whose every ReadAt first returns
// ctx's error if ctx is done.
func ReaderAt(ctx context.Context, r io.ReaderAt) io.ReaderAt {
	return &readerAt{ctx: ctx, r: r}
}

type readerAt struct {
	ctx context.Context
	r   io.ReaderAt
}

func (r *readerAt) ReadAt(p []byte, off int64) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.ReadAt(p, off)
}
