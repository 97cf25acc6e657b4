package node

// SetFlock replaces the flock call for a test (D4) and returns a restore
// function.
func SetFlock(f func(fd int, how int) error) (restore func()) {
	old := flock
	flock = f
	return func() { flock = old }
}
