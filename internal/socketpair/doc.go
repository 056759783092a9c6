// Package socketpair gives tests the two ends of a connected unix stream
// socket: on the host, the faithful stand-in for the streams sbx speaks
// over — a guest agent's virtio-serial port (one reliable, ordered,
// full-duplex byte stream), QMP's socket and the network device's
// "-netdev stream" connection.
//
// It is test support, imported only by tests. The entry point is New.
package socketpair
