package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The local store's directory is removed when it is rebuilt or restored:
// it must never be the data directory or hold it, and the wipe refuses a
// directory that holds the node's durable data (found in review: with
// localStore.dir set to the data directory, a rebuild deleted the log).
//
// Covers: D5, T1
func TestStateDir_NeverHoldsTheDataDirectory(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "data")
	for _, bad := range []string{data, root, data + "/"} {
		if err := checkStateDir(bad, data); err == nil || !strings.Contains(err.Error(), "localStore.dir") {
			t.Errorf("localStore.dir %s with data in %s: %v, want a refusal naming localStore.dir", bad, data, err)
		}
	}
	for _, good := range []string{filepath.Join(data, "state"), filepath.Join(root, "state"), filepath.Join(root, "data2")} {
		if err := checkStateDir(good, data); err != nil {
			t.Errorf("localStore.dir %s with data in %s: %v", good, data, err)
		}
	}

	for _, name := range []string{LockFile, "log", "log-segments"} {
		dir := filepath.Join(root, "wipe-"+name)
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := wipeLocalStore(dir); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("wipe of a directory holding %s: %v, want a refusal naming it", name, err)
		}
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s after a refused wipe: %v", name, err)
		}
	}
	store := filepath.Join(root, "store")
	if err := os.MkdirAll(filepath.Join(store, "pebble"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := wipeLocalStore(store); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(store); !os.IsNotExist(err) {
		t.Fatalf("the local store after a wipe: %v", err)
	}
}
