package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dexzd/dexzd/internal/blob"
)

func TestKindOf_Table(t *testing.T) {
	t.Parallel()
	pg := func(code string) error {
		return fmt.Errorf("query: %w", &pgconn.PgError{Code: code, Message: "synthetic"})
	}
	get, absent, match, list := blob.OpGet, blob.OpPutIfAbsent, blob.OpPutIfMatch, blob.OpList
	cases := []struct {
		name string
		op   string
		err  error
		want error
	}{
		{"get no rows", get, pgx.ErrNoRows, blob.ErrNotFound},
		{"insert no rows", absent, pgx.ErrNoRows, blob.ErrPrecondition},
		{"update no rows", match, pgx.ErrNoRows, blob.ErrPrecondition},
		{"serialization failure", match, pg("40001"), blob.ErrTransient},
		{"deadlock", absent, pg("40P01"), blob.ErrTransient},
		{"admin shutdown", get, pg("57P01"), blob.ErrTransient},
		{"cannot connect now", get, pg("57P03"), blob.ErrTransient},
		{"too many connections", list, pg("53300"), blob.ErrTransient},
		{"disk full", absent, pg("53100"), blob.ErrTransient},
		{"connection failure", get, pg("08006"), blob.ErrTransient},
		{"statement timeout", get, pg("57014"), blob.ErrTransient},
		{"io error", get, pg("58030"), blob.ErrTransient},
		{"permission denied", get, pg("42501"), blob.ErrPermanent},
		{"undefined table", list, pg("42P01"), blob.ErrPermanent},
		{"invalid password", get, pg("28P01"), blob.ErrPermanent},
		{"unknown database", get, pg("3D000"), blob.ErrPermanent},
		{"invalid text", list, pg("22021"), blob.ErrPermanent},
		{"closed store", get, errClosed, blob.ErrPermanent},
		{"refused", get, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, blob.ErrTransient},
		{"reset", absent, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, blob.ErrTransient},
		{"deadline", match, fmt.Errorf("timeout: %w", context.DeadlineExceeded), blob.ErrTransient},
		{"cancelled", list, context.Canceled, blob.ErrTransient},
		{"unknown", get, errors.New("something else"), blob.ErrTransient},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := classify(c.op, "k", c.err)
			if !errors.Is(err, c.want) || blob.Classify(err) != c.want {
				t.Fatalf("classify(%s, %v) = %v, want one matching %v", c.op, c.err, err, c.want)
			}
			if !errors.Is(err, c.err) {
				t.Fatalf("classify(%s, %v) = %v, which does not wrap the cause", c.op, c.err, err)
			}
		})
	}
}

func TestPrefixEnd(t *testing.T) {
	t.Parallel()
	cases := []struct {
		prefix, end string
		ok          bool
	}{
		{"", "", false},
		{"a", "b", true},
		{"n/a/", "n/a0", true},
		{"a~", "a\x7f", true},
		{"a\x7f", "a\u0080", true},
		{"aé", "aê", true},
		{"a\ud7ff", "a\ue000", true},
		{"a\uffff", "a\U00010000", true},
		{"a\U0010FFFF", "b", true},
		{"\U0010FFFF\U0010FFFF", "", false},
	}
	for _, c := range cases {
		end, ok := prefixEnd(c.prefix)
		if end != c.end || ok != c.ok {
			t.Errorf("prefixEnd(%q) = %q, %v; want %q, %v", c.prefix, end, ok, c.end, c.ok)
		}
		if !ok {
			continue
		}
		// Every extension of the prefix sorts below end.
		for _, ext := range []string{"", "\x00", "z", "\U0010FFFF\U0010FFFF"} {
			if k := c.prefix + ext; k >= end {
				t.Errorf("prefixEnd(%q) = %q, not above %q", c.prefix, end, k)
			}
		}
	}
}
