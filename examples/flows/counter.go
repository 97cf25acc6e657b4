package flows

import (
	"errors"

	"github.com/dexzd/dexzd/dex"
)

// Count is the counter's value.
var Count = dex.DefineAttribute[int]("count")

var (
	// Add adds n to the counter and returns the new value. It reads the
	// counter and writes it back: concurrent callers lock it
	// (dex.WithLocks(Count)), or their adds overwrite each other.
	Add = dex.DefineRPC("add", func(ctx dex.Context, n int) (int, error) {
		if n < 0 {
			return 0, errors.New("a counter only grows")
		}
		c, err := Count.Get(ctx)
		if err != nil {
			return 0, err
		}
		Count.Set(ctx, c+n)
		return c + n, nil
	})
	// Get returns the counter.
	Get = dex.DefineRPC("get", func(ctx dex.Context, _ struct{}) (int, error) {
		return Count.Get(ctx)
	})
	// Finish completes the flow with the counter's value.
	Finish = dex.DefineRPC("finish", func(ctx dex.Context, _ struct{}) (int, error) {
		c, err := Count.Get(ctx)
		if err != nil {
			return 0, err
		}
		dex.Schedule(ctx, dex.To[Finished](c))
		return c, nil
	})
)

// Finished completes the counter flow with its final value.
type Finished struct{ dex.Step[int] }

func (Finished) Execute(ctx dex.Context, n int) (dex.Decision, error) {
	return dex.GracefulComplete(n), nil
}

// CounterFlow has no start step: RPCs drive it.
var CounterFlow = dex.NewFlow("counter").
	Steps(Finished{}).
	Attributes(Count).
	RPCs(Add, Get, Finish)
