// Package dextest runs flows in unit tests: Start runs a Dex-ZD dev server
// in the test's process, on the test's temporary directory, with a worker
// that serves the flows and a client connected to it, and stops all three
// when the test ends.
//
//	func TestOrder(t *testing.T) {
//		env := dextest.Start(t, flows.OrderFlow)
//		ctx := t.Context()
//		if _, err := env.Client().StartFlow(ctx, flows.OrderFlow, "o-1", flows.Order{ID: "1", Cents: 100}); err != nil {
//			t.Fatal(err)
//		}
//		res, err := env.Client().WaitForFlow(ctx, "o-1")
//		if err != nil {
//			t.Fatal(err)
//		}
//		receipt, err := dex.Output[flows.Receipt](res)
//		...
//	}
//
// The server is the real one (`dex-server-zd dev`), not a fake: steps run
// on the worker through the worker protocol, retries, timers, channels and
// RPCs behave as in production, and Restart crashes the server and starts
// it again on the same directory, so a test can check that a flow survives
// a crash. The server writes with processCrashSafe durability (no fsync):
// it survives the crash Restart simulates, and it is fast.
//
// # Lifecycle
//
// Start fails the test (t.Fatal) when the server cannot start or a flow
// definition is invalid (the error names the flow and the step). Its
// t.Cleanup stops the worker (draining running tasks), closes the client,
// stops the server gracefully, and then checks that no goroutine of the
// server, the worker or the client is left running; any failure fails the
// test. While the test runs, a server or worker that stops by itself (a
// fatal server error, a worker the server refuses) fails the test at once.
//
// The server's, worker's and client's logs are discarded unless WithLogs
// sends them to the test's output. Each Env runs its own server, so tests
// that use dextest may run in parallel (t.Parallel). The goroutine check
// only runs when no other Env is running (a goroutine cannot be attributed
// to one Env), so in a package of parallel tests the last Env to stop
// checks for all of them.
//
// New starts an Env outside a test (an example, TestMain, a program); Close
// stops it.
package dextest
