package wal

// EncodeSnapshot is encodeSnapshot for the external tests: the version 1
// snapshot format, still read, no longer written.
var EncodeSnapshot = encodeSnapshot
