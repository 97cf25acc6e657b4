package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dexzd/dexzd/internal/blob"
)

// transientStates are the SQLSTATEs (or, for two-character keys, SQLSTATE
// classes) after which a retry may succeed.
var transientStates = map[string]bool{
	"08":    true, // connection exception
	"53":    true, // insufficient resources: too many connections (53300), disk full, out of memory
	"58":    true, // system error: I/O error
	"40000": true, // transaction rollback
	"40001": true, // serialization failure
	"40003": true, // statement completion unknown
	"40P01": true, // deadlock detected
	"55P03": true, // lock not available
	"57014": true, // query canceled (statement timeout)
	"57P01": true, // admin shutdown
	"57P02": true, // crash shutdown
	"57P03": true, // cannot connect now (starting up)
	"57P05": true, // idle session timeout
	"25P03": true, // idle in transaction session timeout
}

// classify maps an error from pgx to a blob error for op on key.
//
//   - pgx.ErrNoRows: not found for get; precondition for the conditional
//     writes (the INSERT met an existing key, the UPDATE no row of that
//     version);
//   - a server error whose SQLSTATE is in transientStates: transient;
//   - any other server error (permission denied 42501, undefined table
//     42P01, invalid password 28P01, invalid text 22021, ...): permanent;
//   - a closed store, and a server certificate that does not verify
//     (sslmode=verify-ca or verify-full): permanent;
//   - everything else (context ends, refused or broken connections,
//     timeouts): transient.
func classify(op, key string, err error) error {
	return blob.Wrap(op, key, kindOf(op, err), err)
}

func kindOf(op string, err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return blob.ErrTransient
	case errors.Is(err, pgx.ErrNoRows):
		switch op {
		case blob.OpGet:
			return blob.ErrNotFound
		case blob.OpPutIfAbsent, blob.OpPutIfMatch:
			return blob.ErrPrecondition
		}
		return blob.ErrPermanent
	case errors.Is(err, errClosed):
		return blob.ErrPermanent
	case blob.IsCertificateError(err):
		return blob.ErrPermanent
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if transientStates[pgErr.Code] || len(pgErr.Code) == 5 && transientStates[pgErr.Code[:2]] {
			return blob.ErrTransient
		}
		return blob.ErrPermanent
	}
	return blob.ErrTransient
}
