package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/internal/testproc"
)

// The searched order flow: Place sets its indexed attributes and waits
// for a "ship" message; Ship marks it shipped and completes.
var (
	searchStatus = dex.DefineAttribute[string]("status", dex.Indexed(dex.IndexKey("OrderStatus")))
	searchAmount = dex.DefineAttribute[int]("amount", dex.Indexed())
	searchTags   = dex.DefineAttribute[[]string]("tags", dex.Indexed())
	searchNote   = dex.DefineAttribute[string]("note", dex.Indexed(dex.IndexAs(dex.IndexText)))
	searchSecret = dex.DefineAttribute[string]("secret") // not indexed: the codec encrypts it
	searchShip   = dex.DefineChannel[string]("ship")
)

type (
	SearchPlace struct{ dex.Step[int] }
	SearchShip  struct{ dex.Step[int] }
)

func (SearchPlace) WaitFor(dex.Context, int) (dex.Wait, error) {
	return dex.Until(searchShip.ForOne()), nil
}

func (SearchPlace) Execute(_ dex.Context, n int, _ dex.Results) (dex.Decision, error) {
	return dex.Move(dex.To[SearchShip](n)), nil
}

func (SearchShip) Execute(ctx dex.Context, n int) (dex.Decision, error) {
	searchStatus.Set(ctx, "shipped")
	return dex.GracefulComplete(n), nil
}

var searchFlow = dex.NewFlow("search-order").Start(SearchPlace{}).Steps(SearchShip{}).
	Attributes(searchStatus, searchAmount, searchTags, searchNote, searchSecret).Channels(searchShip)

// Flows are found by their indexed attributes through the SDK, with a
// codec that encrypts every other value, across pages, after a handler
// changed a value, and after the dev server restarted; a malformed query
// names its position; a worker that gives a key another type is refused
// naming it.
//
// Covers: E36
func TestSearch_ThroughTheSDK(t *testing.T) {
	dir := t.TempDir()
	addr := testproc.FreeAddr(t)
	args := []string{"dev", "--data-dir", dir, "--listen", addr}
	p := testproc.Start(t, args...)
	p.Serving(t, 30*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	codec, err := dex.NewAESGCMCodec(dex.AESGCMKey{ID: "k1", Key: bytes.Repeat([]byte{7}, dex.AESGCMKeySize)})
	if err != nil {
		t.Fatal(err)
	}
	c := testproc.WorkerAndClient(t, ctx, dex.WorkerOptions{Addresses: []string{addr}, Codec: codec,
		ReconnectBackoff: dex.Backoff{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond}}, dex.ClientOptions{Codec: codec}, searchFlow)
	waitFor(t, 10*time.Second, func() bool { return strings.Contains(p.Log(), "worker connected") })

	const n = 25
	for i := range n {
		status := []string{"placed", "charged"}[i%2]
		if _, err := c.StartFlow(ctx, searchFlow, fmt.Sprintf("so-%02d", i), i, dex.WithAttributes(
			searchStatus.Value(status), searchAmount.Value(i*100), searchTags.Value([]string{"eu", fmt.Sprint("t", i%3)}),
			searchNote.Value(fmt.Sprintf("Gift wrap, order %d", i)), searchSecret.Value("s3cret"))); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(q string, pageSize int) []string {
		t.Helper()
		var out []string
		for f, err := range c.Search(ctx, q, pageSize) {
			if err != nil {
				t.Fatalf("search %q: %v", q, err)
			}
			out = append(out, f.FlowID)
		}
		return out
	}
	check := func(q string, pageSize int, want ...string) {
		t.Helper()
		if got := ids(q, pageSize); !slices.Equal(got, want) {
			t.Errorf("search %q (pages of %d): %v, want %v", q, pageSize, got, want)
		}
	}
	check("OrderStatus = 'charged' AND amount >= 1500 ORDER BY amount DESC", 2, "so-23", "so-21", "so-19", "so-17", "so-15")
	check("FlowType = 'search-order' AND tags = 't1' AND amount < 1000", 1, "so-07", "so-04", "so-01")
	check("note = 'ORDER 12 gift'", 10, "so-12")
	check("amount IN (0, 2400) AND Status = 'RUNNING' AND ActiveStepTypes = 'SearchPlace'", 10, "so-24", "so-00")
	if got := ids("", 7); len(got) != n {
		t.Errorf("empty query: %d runs, want %d", len(got), n)
	}

	// One page, with the values: typed back through the attribute.
	page, err := c.SearchFlows(ctx, dex.SearchQuery{Query: "FlowId = 'so-03'"})
	if err != nil || len(page.Flows) != 1 {
		t.Fatalf("FlowId = 'so-03': %+v, %v", page, err)
	}
	f := page.Flows[0]
	if st, ok, err := dex.SearchValue(f, searchStatus); err != nil || !ok || st != "charged" {
		t.Errorf("status of so-03 = %q, %v, %v", st, ok, err)
	}
	if tags, ok, err := dex.SearchValue(f, searchTags); err != nil || !ok || !slices.Equal(tags, []string{"eu", "t0"}) {
		t.Errorf("tags of so-03 = %v, %v, %v", tags, ok, err)
	}
	if _, ok := f.Indexed["secret"]; ok || f.FlowType != "search-order" || f.Status != dex.StatusRunning || f.StartTime.IsZero() {
		t.Errorf("so-03: %+v", f)
	}
	// The codec encrypted the attribute that is not indexed, not the
	// indexed ones: a client without the codec sees both as stored.
	raw, err := dex.NewClient(dex.ClientOptions{Addresses: []string{addr}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	vals, err := raw.GetAttributes(ctx, "so-03", []string{"secret", "status"})
	if err != nil {
		t.Fatal(err)
	}
	if vals["secret"].Encoding() == "json" || vals["status"].Encoding() != "json" {
		t.Errorf("stored encodings: secret %q, status %q; want encrypted and json", vals["secret"].Encoding(), vals["status"].Encoding())
	}

	// A handler's write is indexed when it commits.
	if err := c.Publish(ctx, "so-03", []dex.Message{searchShip.Message("go")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitForFlow(ctx, "so-03"); err != nil {
		t.Fatal(err)
	}
	check("OrderStatus = 'shipped'", 10, "so-03")
	check("OrderStatus = 'charged' AND amount < 600 ORDER BY amount", 10, "so-01", "so-05")

	// A malformed query: INVALID_ARGUMENT with the position.
	_, err = c.SearchFlows(ctx, dex.SearchQuery{Query: "OrderStatus = 'x' AND amount > 'ten'"})
	if s, _ := status.FromError(errors.Unwrap(err)); status.Code(err) != codes.InvalidArgument && s.Code() != codes.InvalidArgument {
		t.Errorf("malformed query: %v, want INVALID_ARGUMENT", err)
	}
	if err == nil || !strings.Contains(err.Error(), "at position 32") || !strings.Contains(err.Error(), "expected an integer") {
		t.Errorf("malformed query: %v, want the position and what was expected", err)
	}
	if _, err := c.SearchFlows(ctx, dex.SearchQuery{Query: "Nope = 1"}); err == nil || !strings.Contains(err.Error(), "unknown field Nope") {
		t.Errorf("unknown field: %v", err)
	}

	// Another flow type giving amount another type is refused, naming it.
	conflict := dex.NewFlow("other").Start(SearchShip{}).Attributes(dex.DefineAttribute[string]("amount", dex.Indexed()))
	w2, err := dex.NewWorker(dex.WorkerOptions{Addresses: []string{addr}, Logger: quietLogger()}, conflict)
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	err = w2.Run(rctx)
	rcancel()
	if err == nil || !strings.Contains(err.Error(), `index key "amount" is INT in flow type "search-order"`) {
		t.Errorf("conflicting worker: %v", err)
	}

	// dexcli flow search: a table with the indexed values, JSON, paging.
	cli := func(args ...string) (string, string, error) {
		cmd := exec.Command(testproc.CLI(t), append([]string{"--server", addr}, args...)...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		return out.String(), errOut.String(), err
	}
	out, _, err := cli("flow", "search", "OrderStatus = 'charged' AND amount < 600 ORDER BY amount")
	if err != nil || !strings.Contains(out, "INDEXED") || !strings.Contains(out, `so-05`) ||
		!strings.Contains(out, `OrderStatus="charged" amount=500 note="Gift wrap, order 5" tags=["eu","t2"]`) {
		t.Errorf("dexcli flow search: %v\n%s", err, out)
	}
	out, stderr, err := cli("flow", "search", "OrderStatus = 'charged' ORDER BY amount", "--limit", "2", "-o", "json")
	var doc struct {
		Flows []struct {
			Summary struct {
				FlowID string `json:"flowId"`
			} `json:"summary"`
		} `json:"flows"`
		NextPageToken string `json:"nextPageToken"`
	}
	if err != nil || json.Unmarshal([]byte(out), &doc) != nil || len(doc.Flows) != 2 || doc.Flows[0].Summary.FlowID != "so-01" || doc.NextPageToken == "" {
		t.Fatalf("dexcli flow search -o json: %v\n%s%s", err, out, stderr)
	}
	out, _, err = cli("flow", "search", "OrderStatus = 'charged' ORDER BY amount", "--limit", "2", "--page-token", doc.NextPageToken, "-o", "json")
	if err != nil || json.Unmarshal([]byte(out), &doc) != nil || len(doc.Flows) != 2 || doc.Flows[0].Summary.FlowID != "so-07" {
		t.Errorf("dexcli flow search --page-token: %v\n%s", err, out)
	}
	if _, stderr, err := cli("flow", "search", "amount >"); err == nil || !strings.Contains(stderr, "INVALID_ARGUMENT") || !strings.Contains(stderr, "at position 9") {
		t.Errorf("dexcli flow search of a malformed query: %v\n%s", err, stderr)
	}

	// After a restart the store and its indexes answer the same.
	before := ids("OrderStatus IN ('charged', 'shipped') ORDER BY amount", 4)
	p.Signal(t, syscall.SIGKILL)
	p.Wait(t, 10*time.Second)
	p = testproc.Start(t, args...)
	p.Serving(t, 30*time.Second)
	waitFor(t, 10*time.Second, func() bool { return strings.Contains(p.Log(), "worker connected") })
	if after := ids("OrderStatus IN ('charged', 'shipped') ORDER BY amount", 4); !slices.Equal(after, before) {
		t.Errorf("after a restart: %v, want %v", after, before)
	}
}

func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
