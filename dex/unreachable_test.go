package dex_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dexzd/dexzd/dex"
)

// syncBuffer is a bytes.Buffer safe for a logger and a test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A client whose server cannot be reached says so after its first failed
// attempt (one WARN naming the address and the error, not one per retry),
// instead of retrying in silence until RetryTimeout; a client given no
// address uses DefaultAddress, as dexcli does.
func TestClient_WarnsWhenItCannotReachTheServer(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close() // nothing listens there now
	var logs syncBuffer
	c, err := dex.NewClient(dex.ClientOptions{Addresses: []string{addr}, RetryTimeout: 600 * time.Millisecond,
		RetryBackoff: dex.Backoff{Initial: 20 * time.Millisecond, Max: 50 * time.Millisecond},
		Logger:       slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = c.GetFlowSummary(ctx, "f")
	if !errors.Is(err, dex.ErrUnavailable) {
		t.Fatalf("GetFlowSummary of an unreachable server = %v, want ErrUnavailable", err)
	}
	out := logs.String()
	if n := strings.Count(out, "level=WARN"); n != 1 || !strings.Contains(out, addr) {
		t.Fatalf("warnings while retrying for 600 ms: %d, want 1 naming %s:\n%s", n, addr, out)
	}

	d, err := dex.NewClient(dex.ClientOptions{Logger: quietLogger()})
	if err != nil {
		t.Fatalf("NewClient without addresses: %v, want DefaultAddress", err)
	}
	_ = d.Close()
	if dex.DefaultAddress != "127.0.0.1:8801" {
		t.Errorf("DefaultAddress = %q", dex.DefaultAddress)
	}
}
