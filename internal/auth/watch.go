package auth

import (
	"log/slog"
	"os"
	"sync"
	"time"
)

// DefaultCheckInterval is how often a watched file (the tokens file, a
// certificate, a key, a CA bundle) is looked at for a change: at most once
// per interval, on use. Kubernetes replaces a mounted Secret's files in
// place (a new directory behind a symbolic link), which changes their
// identity, size or modification time.
const DefaultCheckInterval = time.Second

// watched is a set of files re-read, on use, at most once per interval
// when any of them changed since they were last read.
type watched struct {
	paths    []string
	interval time.Duration
	now      func() time.Time

	mu      sync.Mutex
	checked time.Time
	stamps  []os.FileInfo
	// failedErr is the error of the last failed reload, logged once.
	failedErr string
}

func newWatched(interval time.Duration, now func() time.Time, paths ...string) *watched {
	if interval <= 0 {
		interval = DefaultCheckInterval
	}
	if now == nil {
		now = time.Now
	}
	return &watched{paths: paths, interval: interval, now: now}
}

// due reports whether the files should be read again: the first time,
// and then when the interval has passed since the last look and a file
// changed. The caller loads them between statAll and record.
func (w *watched) due() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	if w.stamps != nil && now.Sub(w.checked) < w.interval {
		return false
	}
	w.checked = now
	if w.stamps == nil {
		return true
	}
	for i, p := range w.paths {
		fi, err := os.Stat(p)
		if err != nil {
			// A file being replaced: look again on the next check; the
			// load reports an error that stays.
			return true
		}
		old := w.stamps[i]
		if old == nil || !os.SameFile(old, fi) || !old.ModTime().Equal(fi.ModTime()) || old.Size() != fi.Size() {
			return true
		}
	}
	return false
}

// statAll takes the files' state before they are read; record keeps it
// once the load succeeded, so that a change between the two is seen on
// the next check.
func (w *watched) statAll() []os.FileInfo {
	stamps := make([]os.FileInfo, len(w.paths))
	for i, p := range w.paths {
		if fi, err := os.Stat(p); err == nil {
			stamps[i] = fi
		}
	}
	return stamps
}

func (w *watched) record(stamps []os.FileInfo) {
	w.mu.Lock()
	w.stamps = stamps
	w.mu.Unlock()
}

// refresh runs load when the files are due; a failure keeps what was
// loaded last and is logged at WARN once per distinct error, a success at
// INFO. what names the files in the lines ("tokens file").
func (w *watched) refresh(log *slog.Logger, key, what string, load func() error) {
	if !w.due() {
		return
	}
	if err := load(); err != nil {
		w.mu.Lock()
		first := w.failedErr != err.Error()
		w.failedErr = err.Error()
		w.mu.Unlock()
		if first {
			log.Warn(what+" not reloaded; the files read last stay in use", "key", key, "error", err)
		}
		return
	}
	w.mu.Lock()
	w.failedErr = ""
	w.mu.Unlock()
	log.Info(what+" reloaded", "key", key)
}
