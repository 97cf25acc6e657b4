package auth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

// MinTokenLength is the shortest token a tokens file may hold: a bearer
// token is a password, and a short one is guessed.
const MinTokenLength = 16

// The tokens file (auth.tokensFile, metrics.tokensFile) holds one token per
// line: the token, its role (ParseGrant) and optionally a name the logs
// use instead of the token:
//
//	# token                            role                    name
//	6f1c0c0e6d2b4c6fa2d8b1d5b0a1c9e7   client                  billing-api
//	2b9d0a7e55c84a4c8f1e3d6b7a9c0e12   worker:order,approval   orders-worker
//
// Blank lines and lines starting with '#' are ignored. A token appears at
// most once. A token without a name is logged as the first 8 hex digits
// of its SHA-256.

type tokenEntry struct {
	name  string
	grant Grant
}

// tokenKey is what tokens are looked up by: a hash, so that the lookup's
// timing says nothing of the token.
type tokenKey [sha256.Size]byte

func keyOf(token string) tokenKey { return sha256.Sum256([]byte(token)) }

// ParseTokens reads a tokens file's content. Errors name the line, never
// the token.
func ParseTokens(data []byte) (map[tokenKey]tokenEntry, error) {
	out := map[tokenKey]tokenEntry{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 || len(f) > 3 {
			return nil, fmt.Errorf("line %d: want \"TOKEN ROLE [NAME]\", got %d fields", n, len(f))
		}
		if len(f[0]) < MinTokenLength {
			return nil, fmt.Errorf("line %d: the token is shorter than %d characters", n, MinTokenLength)
		}
		g, err := ParseGrant(f[1])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		k := keyOf(f[0])
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("line %d: the token appears on an earlier line too", n)
		}
		name := "sha256:" + hex.EncodeToString(k[:4])
		if len(f) == 3 {
			name = f[2]
		}
		out[k] = tokenEntry{name: name, grant: g}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// TokenFile is a tokens file, re-read on use when it changed (at most
// once per check interval). A change that does not parse keeps the tokens
// read last and is logged at WARN; the next change is read again.
type TokenFile struct {
	path string
	key  string // the configuration key, for messages
	log  *slog.Logger
	w    *watched

	mu     sync.RWMutex
	tokens map[tokenKey]tokenEntry
}

// OpenTokenFile reads the tokens file at path (named by the configuration
// key key in errors). interval 0 means DefaultCheckInterval; now nil means
// time.Now.
func OpenTokenFile(key, path string, log *slog.Logger, interval time.Duration, now func() time.Time) (*TokenFile, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &TokenFile{path: path, key: key, log: log, w: newWatched(interval, now, path)}
	f.w.due()
	if err := f.load(); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *TokenFile) load() error {
	st := f.w.statAll()
	data, err := os.ReadFile(f.path)
	if err != nil {
		return fmt.Errorf("%s: %w", f.key, err)
	}
	tokens, err := ParseTokens(data)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", f.key, f.path, err)
	}
	f.mu.Lock()
	f.tokens = tokens
	f.mu.Unlock()
	f.w.record(st)
	return nil
}

// Len is the number of tokens.
func (f *TokenFile) Len() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.tokens)
}

// Lookup returns the principal of token, after re-reading the file if it
// changed.
func (f *TokenFile) Lookup(token string) (Principal, bool) {
	f.w.refresh(f.log, f.key, "tokens file", f.load)
	f.mu.RLock()
	e, ok := f.tokens[keyOf(token)]
	f.mu.RUnlock()
	if !ok {
		return Principal{}, false
	}
	return Principal{Identity: "token " + e.name, Grant: e.grant}, true
}
