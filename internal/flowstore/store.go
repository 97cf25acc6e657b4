package flowstore

import (
	"errors"
	"time"

	"github.com/dexzd/dexzd/internal/engine"
)

// Store is the local store as the serving core and the node use it: the committed, materialised
// state of every flow, and the sequence number of the last log batch applied
// to it. Package localstore (Pebble) implements it through an adapter;
// MemStore is an in-memory implementation for tests.
//
// Only the writer goroutine calls Apply (batches arrive in sequence order);
// the read methods may be called from any goroutine at any time and see
// committed state only.
type Store interface {
	// Applied returns the sequence number of the last batch applied; ok is
	// false when none was (a fresh store: replay from 0).
	Applied() (seq uint64, ok bool)

	// Apply runs fn in one transaction and records seq as applied,
	// atomically: either fn's writes and the new position are both stored or
	// neither is. seq must be greater than Applied(). An error from fn
	// aborts the transaction and is returned.
	Apply(seq uint64, fn func(tx Tx) error) error

	// Flow returns the latest run of flowID, or (nil, nil) when the flow ID
	// has none. The caller owns the returned value.
	Flow(flowID string) (*engine.FlowState, error)

	// Run returns the run runID of flowID, latest or earlier, or (nil, nil).
	Run(flowID, runID string) (*engine.FlowState, error)

	// ListFlows lists runs (every run, not only the latest) matching q,
	// newest start first, and the token of the next page ("" on the last).
	// A page token that does not belong to q's filters is an error matching
	// ErrBadPageToken.
	ListFlows(q ListQuery) ([]engine.Summary, string, error)

	// RunningFlows calls fn for the latest run of every flow ID whose run is
	// RUNNING, until fn returns an error, which it returns.
	RunningFlows(fn func(st *engine.FlowState) error) error

	// FlowTypes calls fn for every flow type with a recorded declaration
	// (Tx.PutFlowType): the flow ID and run ID of the run holding its
	// latest one, until fn returns an error, which it returns.
	FlowTypes(fn func(flowType, flowID, runID string) error) error

	// Close releases the store.
	Close() error
}

// Tx is one Apply transaction.
type Tx interface {
	// Flow returns the latest run of flowID as the transaction sees it, or
	// (nil, nil). The caller owns the returned value.
	Flow(flowID string) (*engine.FlowState, error)
	// PutFlow stores st as the latest run of its flow ID. When it is a new
	// run, the previous latest run stays readable through Run and ListFlows.
	PutFlow(st *engine.FlowState) error
	// PutFlowType records that run runID of flowID holds the latest
	// declaration of flowType (its definition and defaults); the last call
	// in log order wins.
	PutFlowType(flowType, flowID, runID string) error
}

// ListQuery filters and pages ListFlows (E27). Zero fields match everything.
type ListQuery struct {
	FlowType  string
	Statuses  []engine.Status
	From, To  time.Time // start time in [From, To)
	PageSize  int       // 0 means 100
	PageToken string
}

// ErrBadPageToken is returned by ListFlows for a page token that does not
// belong to the query.
var ErrBadPageToken = errors.New("page token does not match the query")
