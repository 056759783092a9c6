// Package ctxiotest gives tests a context that is cancelled at a chosen
// point of the work that consults it, so that "Ctrl-C in the middle of a
// write" is an event in a known place rather than a timer that may fire
// before the work starts or after it ends.
//
// Code written with package ctxio asks the context for its error before
// every read and write; CancelAt(n) cancels at the n-th such question,
// which falls between two writes of a build in progress. A first run
// with CancelAt(0) (never) counts the questions a whole build asks.
// Where the test holds the writer, CancellingWriterAt cancels during its
// k-th write instead and counts the writes that still come after it.
//
// It is test support, imported only by tests.
package ctxiotest
