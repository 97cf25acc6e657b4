// Package postgres is a blob.Store on one PostgreSQL table through pgx.
//
// The table holds (key text COLLATE "C" PRIMARY KEY, data bytea, version
// bigint). Versions are drawn from a sequence owned by the table, so a key
// that is deleted and created again never repeats a version. Every call is a
// single statement in its own implicit transaction: PutIfAbsent is an INSERT
// ... ON CONFLICT DO NOTHING, PutIfMatch an UPDATE guarded by the version;
// the row lock taken by each decides races. Keys sort in byte order because
// the key column uses the "C" collation.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dexzd/dexzd/internal/blob"
)

// DefaultTable is the table used when Config.Table is empty.
const DefaultTable = "dex_blobs"

// defaultMaxConns bounds the connections of a store when Config.MaxConns is 0.
const defaultMaxConns = 8

// closeGrace is how long Close lets the statements in flight finish and
// the connections say goodbye before it cuts the connections, and how long
// it then waits for the calls in flight to return.
const closeGrace = time.Second

// opOpen names New in the errors it returns.
const opOpen = "open"

// Config selects the database and table.
type Config struct {
	// DSN is a libpq connection string or URL, such as
	// postgres://user:pass@127.0.0.1:5432/db?sslmode=disable.
	DSN string
	// Table is the table name, optionally schema-qualified ("schema.table"),
	// made of lower-case letters, digits and '_'. Empty means DefaultTable.
	Table string
	// MaxConns bounds the open connections; 0 means 8.
	MaxConns int
}

// Stats counts the statements a Store has run, by kind.
type Stats struct {
	Get    int64
	Put    int64
	List   int64
	Delete int64
}

// Store is a blob.Store on one table. It is safe for concurrent use.
type Store struct {
	pool  *pgxpool.Pool
	conns *connSet // every connection pool dialled, for Close to cut
	table string   // for error messages

	qGet, qPutAbsent, qPutMatch, qDelete, qList, qListBounded string

	gets, puts, lists, deletes atomic.Int64
	closed                     atomic.Bool
	closeOnce                  sync.Once
	closeErr                   error
}

var _ blob.Store = (*Store)(nil)

var identRE = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// seqSuffix names the version sequence after its table.
const seqSuffix = "_version_seq"

// CheckConfig reports what New refuses in cfg before it connects: a DSN
// that does not parse, a table name that is not accepted. Its errors are
// configuration errors; New returns the same ones unclassified.
func CheckConfig(cfg Config) error {
	table := cfg.Table
	if table == "" {
		table = DefaultTable
	}
	if _, _, err := identifiers(table); err != nil {
		return fmt.Errorf("postgres store: %w", err)
	}
	if _, err := pgxpool.ParseConfig(cfg.DSN); err != nil {
		return fmt.Errorf("postgres store: parse DSN: %w", err)
	}
	return nil
}

// New connects, creates the table and its sequence if they are missing, and
// returns a store. Creation is serialized by an advisory lock, so processes
// may start side by side. Errors from reaching the database are classified
// like those of the store's methods (op "open").
func New(ctx context.Context, cfg Config) (*Store, error) {
	table := cfg.Table
	if table == "" {
		table = DefaultTable
	}
	tableID, seqID, err := identifiers(table)
	if err != nil {
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	poolCfg, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("postgres store: parse DSN: %w", err)
	}
	maxConns := cfg.MaxConns
	if maxConns <= 0 {
		maxConns = defaultMaxConns
	}
	poolCfg.MaxConns = int32(maxConns) //nolint:gosec // small positive
	// Connections are dialled lazily; New's first statement reaches the
	// database and reports an unreachable one.
	poolCfg.MinConns = 0
	conns := newConnSet()
	poolCfg.ConnConfig.DialFunc = conns.dialer(poolCfg.ConnConfig.DialFunc)
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return nil, classify(opOpen, table, err)
	}
	t, seq := tableID.Sanitize(), seqID.Sanitize()
	s := &Store{
		pool:       pool,
		conns:      conns,
		table:      table,
		qGet:       `SELECT data, version FROM ` + t + ` WHERE key = $1`,
		qPutAbsent: `INSERT INTO ` + t + ` (key, data) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING RETURNING version`,
		qPutMatch:  `UPDATE ` + t + ` SET data = $3, version = DEFAULT WHERE key = $1 AND version = $2 RETURNING version`,
		qDelete:    `DELETE FROM ` + t + ` WHERE key = $1`,
		qList: `SELECT key FROM ` + t + ` WHERE key COLLATE "C" > $1 AND key COLLATE "C" >= $2` +
			` ORDER BY key COLLATE "C" LIMIT $3`,
		qListBounded: `SELECT key FROM ` + t + ` WHERE key COLLATE "C" > $1 AND key COLLATE "C" >= $2` +
			` AND key COLLATE "C" < $4 ORDER BY key COLLATE "C" LIMIT $3`,
	}
	if err := s.createSchema(ctx, t, seq); err != nil {
		_ = s.Close() // bounded: New may fail on a database no packet reaches
		return nil, err
	}
	return s, nil
}

// identifiers checks a table name and returns it and its sequence's name.
func identifiers(table string) (tableID, seqID pgx.Identifier, err error) {
	parts := strings.Split(table, ".")
	if len(parts) > 2 {
		return nil, nil, fmt.Errorf("table %q: want name or schema.name", table)
	}
	for _, p := range parts {
		if !identRE.MatchString(p) {
			return nil, nil, fmt.Errorf("table %q: names are lower-case letters, digits and '_'", table)
		}
	}
	name := parts[len(parts)-1]
	if len(name)+len(seqSuffix) > 63 || len(parts[0]) > 63 {
		return nil, nil, fmt.Errorf("table %q: name longer than %d bytes", table, 63-len(seqSuffix))
	}
	tableID = pgx.Identifier(parts)
	seqID = append(pgx.Identifier(nil), parts...)
	seqID[len(seqID)-1] = name + seqSuffix
	return tableID, seqID, nil
}

// createSchema creates the sequence and the table unless the table exists.
// The existence check first lets a role without CREATE rights open a store
// on a table made for it.
func (s *Store) createSchema(ctx context.Context, t, seq string) error {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return classify(opOpen, s.table, err)
	}
	defer pc.Release()
	c := pc.Conn()
	var exists bool
	if err := c.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, t).Scan(&exists); err != nil {
		return classify(opOpen, s.table, fmt.Errorf("look up table: %w", err))
	}
	if exists {
		return nil
	}
	err = pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
		// Two processes racing through CREATE ... IF NOT EXISTS can both
		// miss the other's uncommitted catalog rows and fail on a unique
		// violation; the lock makes them take turns.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('dexzd blob schema'), hashtext($1))`, t); err != nil {
			return err
		}
		for _, stmt := range []string{
			`CREATE SEQUENCE IF NOT EXISTS ` + seq,
			`CREATE TABLE IF NOT EXISTS ` + t + ` (
				key     text COLLATE "C" PRIMARY KEY,
				data    bytea NOT NULL,
				version bigint NOT NULL DEFAULT nextval('` + seq + `'))`,
			`ALTER SEQUENCE ` + seq + ` OWNED BY ` + t + `.version`,
		} {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return classify(opOpen, s.table, fmt.Errorf("create table: %w", err))
	}
	return nil
}

// Stats returns the number of statements run so far.
func (s *Store) Stats() Stats {
	return Stats{Get: s.gets.Load(), Put: s.puts.Load(), List: s.lists.Load(), Delete: s.deletes.Load()}
}

// run hands fn a connection and classifies the error fn returns.
func (s *Store) run(ctx context.Context, op, key string, fn func(c *pgx.Conn) error) error {
	if err := ctx.Err(); err != nil {
		return blob.Transient(op, key, err)
	}
	if s.closed.Load() {
		return blob.Permanent(op, key, errClosed)
	}
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		if s.closed.Load() {
			return blob.Permanent(op, key, errClosed) // Close came first: nothing was sent
		}
		return classify(op, key, err)
	}
	defer pc.Release()
	if err := fn(pc.Conn()); err != nil {
		err = classify(op, key, err)
		if s.closed.Load() && errors.Is(err, blob.ErrTransient) {
			// Its outcome is unknown: it may have landed.
			err = fmt.Errorf("store closed while the statement was in flight: %w", err)
		}
		return err
	}
	return nil
}

// Get implements blob.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, blob.Version, error) {
	if err := blob.CheckedKey(blob.OpGet, key); err != nil {
		return nil, "", err
	}
	var data []byte
	var v int64
	err := s.run(ctx, blob.OpGet, key, func(c *pgx.Conn) error {
		s.gets.Add(1)
		return c.QueryRow(ctx, s.qGet, key).Scan(&data, &v)
	})
	if err != nil {
		return nil, "", err
	}
	if data == nil {
		data = []byte{}
	}
	return data, version(v), nil
}

// PutIfAbsent implements blob.Store.
func (s *Store) PutIfAbsent(ctx context.Context, key string, data []byte) (blob.Version, error) {
	if err := blob.CheckedKey(blob.OpPutIfAbsent, key); err != nil {
		return "", err
	}
	if data == nil {
		data = []byte{} // nil would be NULL
	}
	var v int64
	err := s.run(ctx, blob.OpPutIfAbsent, key, func(c *pgx.Conn) error {
		s.puts.Add(1)
		return c.QueryRow(ctx, s.qPutAbsent, key, data).Scan(&v)
	})
	if err != nil {
		return "", err
	}
	return version(v), nil
}

// PutIfMatch implements blob.Store.
func (s *Store) PutIfMatch(ctx context.Context, key string, data []byte, v blob.Version) (blob.Version, error) {
	if err := blob.CheckedKey(blob.OpPutIfMatch, key); err != nil {
		return "", err
	}
	want, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		// Not a version this store hands out, so the key cannot hold it.
		return "", blob.Precondition(blob.OpPutIfMatch, key)
	}
	if data == nil {
		data = []byte{}
	}
	var nv int64
	err = s.run(ctx, blob.OpPutIfMatch, key, func(c *pgx.Conn) error {
		s.puts.Add(1)
		return c.QueryRow(ctx, s.qPutMatch, key, want, data).Scan(&nv)
	})
	if err != nil {
		return "", err
	}
	return version(nv), nil
}

// List implements blob.Store. A prefix or startAfter that is not valid
// UTF-8 (and so cannot be compared with text) gives a permanent error.
func (s *Store) List(ctx context.Context, prefix, startAfter string, limit int) ([]string, error) {
	var lim any // NULL: LIMIT ALL
	if limit > 0 {
		lim = limit
	}
	q, args := s.qList, []any{startAfter, prefix, lim}
	if end, ok := prefixEnd(prefix); ok {
		q, args = s.qListBounded, append(args, end)
	}
	var keys []string
	err := s.run(ctx, blob.OpList, prefix, func(c *pgx.Conn) error {
		s.lists.Add(1)
		rows, err := c.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		keys, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, err
	}
	return keys, nil
}

// prefixEnd returns the least string above every string that starts with p,
// in code point order (which is UTF-8 byte order), so that the keys with
// prefix p are exactly those in [p, end). ok is false when there is no such
// bound: p is empty or made only of U+10FFFF.
func prefixEnd(p string) (end string, ok bool) {
	for p != "" {
		r, size := utf8.DecodeLastRuneInString(p)
		p = p[:len(p)-size]
		if r == utf8.MaxRune {
			continue
		}
		r++
		if r == 0xD800 { // surrogates are not valid in UTF-8
			r = 0xE000
		}
		return p + string(r), true
	}
	return "", false
}

// Delete implements blob.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := blob.CheckedKey(blob.OpDelete, key); err != nil {
		return err
	}
	return s.run(ctx, blob.OpDelete, key, func(c *pgx.Conn) error {
		s.deletes.Add(1)
		_, err := c.Exec(ctx, s.qDelete, key)
		return err
	})
}

// Close implements blob.Store. Calls made after Close fail with a permanent
// error. The calls in flight get closeGrace to finish and report their
// outcome, as the idle connections do to say goodbye to the database; then
// Close cuts every connection the store opened, so that a call still
// waiting for its answer fails with a transient error (it may have
// landed) and is never reported done. Close returns once the calls in
// flight have returned, about closeGrace after it was called on a database
// no packet reaches (pgxpool alone waits for them and gives each
// connection 15 s), and an error if pgx has not let go of its connections
// closeGrace after the cut. Later and concurrent calls of Close wait for
// the first and return what it returned.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.pool.Close()
		}()
		t := time.NewTimer(closeGrace)
		defer t.Stop()
		select {
		case <-done:
			s.conns.cutAll() // nothing is left: ends the set's context
			return
		case <-t.C:
		}
		s.conns.cutAll()
		t.Reset(closeGrace)
		select {
		case <-done:
		case <-t.C:
			s.closeErr = fmt.Errorf("postgres store %s: connections still closing %s after they were cut", s.table, closeGrace)
		}
	})
	return s.closeErr
}

// errClosed is what calls after Close fail with.
var errClosed = errors.New("store is closed")

func version(v int64) blob.Version { return blob.Version(strconv.FormatInt(v, 10)) }
