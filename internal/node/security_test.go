package node

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/dexzd/dexzd/internal/config"
)

// /livez is always open; /readyz is open unless metrics.readyzOpen is
// false; everything else needs a token of metrics.tokensFile with role
// reader (or above).
func TestMetricsSecurity_TokensAndOpenProbes(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "tokens")
	const reader, worker = "reader-token-0123456789", "worker-token-0123456789"
	if err := os.WriteFile(p, []byte(reader+" reader\n"+worker+" worker:order\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	for _, readyzOpen := range []bool{true, false} {
		h, ts, err := metricsSecurity(config.Metrics{Listen: "x", TokensFile: p, ReadyzOpen: readyzOpen}, ok, nil)
		if err != nil || ts != nil {
			t.Fatalf("metricsSecurity = %v, %v", ts, err)
		}
		cases := []struct {
			path, token string
			want        int
		}{
			{"/livez", "", 200},
			{"/readyz", "", map[bool]int{true: 200, false: 401}[readyzOpen]},
			{"/readyz", reader, 200},
			{"/metrics", "", 401},
			{"/metrics", worker, 401},
			{"/metrics", "unknown-token-0123456789", 401},
			{"/metrics", reader, 200},
		}
		for _, c := range cases {
			req := httptest.NewRequest(http.MethodGet, c.path, nil)
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != c.want {
				t.Errorf("readyzOpen %v: GET %s with token %q = %d, want %d", readyzOpen, c.path, c.token, rec.Code, c.want)
			}
		}
	}
}
