package fs

import (
	"errors"
	iofs "io/fs"
	"syscall"
	"testing"

	"github.com/dexzd/dexzd/internal/blob"
)

// A full disk is permanent: retrying it until the 10 s write deadline made
// a restart on a full disk hang instead of failing fast (issue 11 item 5).
func TestClassify_FullDiskIsPermanent(t *testing.T) {
	t.Parallel()
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT} {
		err := classify(blob.OpPutIfAbsent, "k", &iofs.PathError{Op: "write", Path: "/d/k", Err: errno})
		if blob.Classify(err) != blob.ErrPermanent || !errors.Is(err, errno) {
			t.Errorf("%v classified %v; want permanent, wrapping the errno", errno, blob.Classify(err))
		}
	}
}
