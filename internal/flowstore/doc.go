// Package flowstore is the local state of a process as the serving core
// (package serving) and the process lifecycle (package node) use it: the
// committed, materialised state of every flow and the position of the last
// log batch applied to it (Store, Tx), read by the core and written by
// applying durable log batches, one transaction per batch.
//
// Two implementations: the Pebble local store of package localstore,
// opened (OpenLocal) or restored from a snapshot (RestoreLocal) behind a
// bounded cache of decoded states (statecache.go; LimitStateCache sets
// limits.stateCacheBytes), and MemStore, in memory, for tests and
// embedded use. Checkpoint writes a snapshot of a Pebble-backed Store.
//
// Not found is (nil, nil) here, where package localstore returns
// localstore.ErrNotFound; callers own every state they read.
package flowstore
