package cli

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/dex/dextest"
	"github.com/dexzd/dexzd/examples/flows"
)

func writeKeyFile(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "codec-keys")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func keyLine(id string, fill byte) string {
	return id + ":" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{fill}, dex.AESGCMKeySize))
}

// dexcli with --codec-key-file speaks to workers that encrypt their
// values: what it sends is encrypted with the file's first key (the worker
// decodes it) and what it reads is decrypted; without the file it shows
// the ciphertext, and with a file that lacks the key it says which key.
func TestCodecKeyFile_EncryptsAndDecryptsValues(t *testing.T) {
	t.Parallel()
	keys := []dex.AESGCMKey{
		{ID: "k2", Key: bytes.Repeat([]byte{2}, dex.AESGCMKeySize)},
		{ID: "k1", Key: bytes.Repeat([]byte{1}, dex.AESGCMKeySize)},
	}
	codec, err := dex.NewAESGCMCodec(keys...)
	if err != nil {
		t.Fatal(err)
	}
	env := dextest.StartWith(t, []*dex.Flow{flows.ApprovalFlow}, dextest.WithCodec(codec))
	addr := env.Addr()
	// The CLI's file names the same keys, the current one first.
	file := writeKeyFile(t, "# rotated", keyLine("k2", 2), keyLine("k1", 1))

	runCLI(t, "--server", addr, "--codec-key-file", file, "flow", "start", "approval", "a1",
		"--input", `{"id":"req-SECRET-1","amount":5}`).wantCode(t, exitOK)
	runCLIEnv(t, map[string]string{"DEX_CODEC_KEY_FILE": file}, "--server", addr,
		"flow", "publish", "a1", "approve", `{"approved":true,"by":"SECRET-approver"}`).wantCode(t, exitOK)
	r := runCLI(t, "--server", addr, "--codec-key-file", file, "flow", "wait", "a1", "-o", "json")
	r.wantCode(t, exitOK)
	r.wantStdout(t, `"by": "SECRET-approver"`, `"outcome": "approved"`, `"requestId": "req-SECRET-1"`)
	r = runCLI(t, "--server", addr, "--codec-key-file", file, "flow", "state", "a1")
	r.wantCode(t, exitOK)
	r.wantStdout(t, "SECRET-approver")

	// Without the key file: ciphertext only.
	r = runCLI(t, "--server", addr, "flow", "state", "a1", "-o", "json")
	r.wantCode(t, exitOK)
	r.wantStdout(t, `"encoding": "aes256-gcm"`)
	if strings.Contains(r.stdout, "SECRET") {
		t.Errorf("dexcli without the key file shows plaintext:\n%s", r.stdout)
	}
	// With a file that lacks the values' key: an error naming it.
	other := writeKeyFile(t, keyLine("k9", 9))
	r = runCLI(t, "--server", addr, "--codec-key-file", other, "flow", "state", "a1")
	r.wantCode(t, exitFailure)
	r.wantStderr(t, `key "k2"`, "codec: decode state.outputs[0].output", "--codec-key-file does not hold")
	if strings.Contains(r.stderr, "UNKNOWN") {
		t.Errorf("a codec error is reported as a server error:\n%s", r.stderr)
	}

	// A key file that cannot be read or parsed is a usage error naming
	// the flag and the line, never the key.
	bad := writeKeyFile(t, "k1:"+base64.StdEncoding.EncodeToString([]byte("short key")))
	r = runCLI(t, "--server", addr, "--codec-key-file", bad, "flow", "state", "a1")
	r.wantCode(t, exitUsage)
	r.wantStderr(t, "--codec-key-file", "line 1", "is 9 bytes, want 32")
	if strings.Contains(r.stderr, base64.StdEncoding.EncodeToString([]byte("short key"))) {
		t.Errorf("the usage error shows the key:\n%s", r.stderr)
	}
	r = runCLI(t, "--server", addr, "--codec-key-file", filepath.Join(t.TempDir(), "missing"), "flow", "state", "a1")
	r.wantCode(t, exitUsage)
	r.wantStderr(t, "--codec-key-file", "no such file")
}
