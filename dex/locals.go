package dex

// Local is a typed step-execution local key (E32): a WaitFor sets it, the
// same step execution's Execute reads it.
//
//	var Cursor = dex.DefineLocal[string]("cursor")
//
//	func (Poll) WaitFor(ctx dex.Context, in Job) (dex.Wait, error) {
//		Cursor.Set(ctx, "page-7")
//		return Items.ForOne(), nil
//	}
//
//	func (Poll) Execute(ctx dex.Context, in Job, r dex.Results) (dex.Decision, error) {
//		cursor, ok, err := Cursor.Get(ctx)
//		...
//	}
type Local[T any] struct{ key string }

// DefineLocal declares a step-execution local key with value type T.
func DefineLocal[T any](key string) Local[T] { return Local[T]{key: key} }

// Key is the local's key.
func (l Local[T]) Key() string { return l.key }

// Set stages the local's value (WaitFor only; see Context.SetLocal).
func (l Local[T]) Set(ctx Context, v T) {
	ev, err := encodeValue(v)
	ctx.state().setLocal(l.key, ev, err)
}

// Get returns the local's value and whether the WaitFor wrote it.
func (l Local[T]) Get(ctx Context) (T, bool, error) {
	ev := ctx.state().local(l.key)
	if ev == nil {
		var zero T
		return zero, false, nil
	}
	v, err := decodeValue[T](ev)
	return v, true, err
}
