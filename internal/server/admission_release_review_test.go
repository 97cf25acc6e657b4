package server

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc"

	"github.com/dexzd/dexzd/api/dexpb"
)

// countingAdmitter is a Backend whose Admit counts admissions and releases;
// its other methods are never called here.
type countingAdmitter struct {
	Backend
	admitted, released int
}

func (c *countingAdmitter) Admit(Work) (func(), error) {
	c.admitted++
	return func() { c.released++ }, nil
}

// An InvokeRPC's admission is released exactly once whatever its handler
// does: released early by ReleaseAdmission (once or twice), or not at all
// before returning early with an error; ReleaseAdmission on a context of no
// admitted call (or of another, already finished call) releases nothing.
//
// Covers: E22
func TestReview_ReleaseAdmissionReleasesExactlyOnce(t *testing.T) {
	info := &grpc.UnaryServerInfo{FullMethod: dexpb.FlowService_InvokeRPC_FullMethodName}
	for _, tc := range []struct {
		name     string
		handler  func(ctx context.Context) error
		released int // after the handler's ReleaseAdmission calls, before it returns
	}{
		{"early error, no release", func(context.Context) error { return errors.New("bad input") }, 0},
		{"released once", func(ctx context.Context) error { ReleaseAdmission(ctx); return nil }, 1},
		{"released twice", func(ctx context.Context) error { ReleaseAdmission(ctx); ReleaseAdmission(ctx); return nil }, 1},
		{"release of an unadmitted context", func(context.Context) error { ReleaseAdmission(context.Background()); return nil }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &countingAdmitter{}
			s := New(Options{})
			s.SetBackend(a)
			var during int
			var callCtx context.Context
			_, _ = s.admit(context.Background(), &dexpb.InvokeRPCRequest{}, info, func(ctx context.Context, _ any) (any, error) {
				callCtx = ctx
				err := tc.handler(ctx)
				during = a.released
				return nil, err
			})
			if during != tc.released {
				t.Errorf("released %d times inside the handler, want %d", during, tc.released)
			}
			if a.admitted != 1 || a.released != 1 {
				t.Fatalf("admitted %d, released %d after the call; want 1 and 1", a.admitted, a.released)
			}
			ReleaseAdmission(callCtx) // a late release after the call ended
			if a.released != 1 {
				t.Fatalf("a late ReleaseAdmission released again: %d", a.released)
			}
		})
	}
}
