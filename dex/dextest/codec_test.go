package dextest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/dex/dexraw"
)

// The vault flow carries its values through every kind of user value: a
// start input and initial attribute, an RPC payload and answer that write
// an attribute, a client's channel message received by a WaitFor, a
// handler's channel message, a movement's input and the output.
type (
	vaultIn      struct{ Text string }
	vaultNote    struct{ Text string }
	vaultReceipt struct{ Joined, Ledger string }
)

var (
	vaultLedger = dex.DefineAttribute[string]("ledger")
	vaultNotes  = dex.DefineChannel[vaultNote]("notes")
	vaultOutbox = dex.DefineChannel[string]("outbox")
	vaultPeek   = dex.DefineRPC("peek", func(ctx dex.Context, in string) (string, error) {
		l, err := vaultLedger.Get(ctx)
		if err != nil {
			return "", err
		}
		vaultLedger.Set(ctx, l+"|"+in)
		return in + "-answer", nil
	})
)

type vaultCollect struct{ dex.Step[vaultIn] }

func (vaultCollect) WaitFor(dex.Context, vaultIn) (dex.Wait, error) { return vaultNotes.ForOne(), nil }

func (vaultCollect) Execute(ctx dex.Context, in vaultIn, r dex.Results) (dex.Decision, error) {
	n, _ := vaultNotes.Received(r)
	vaultOutbox.Publish(ctx, in.Text+"-pub")
	return dex.Move(dex.To[vaultSeal](in.Text + "+" + n.Text)), nil
}

type vaultSeal struct{ dex.Step[string] }

func (vaultSeal) Execute(ctx dex.Context, in string) (dex.Decision, error) {
	l, err := vaultLedger.Get(ctx)
	if err != nil {
		return nil, err
	}
	return dex.GracefulComplete(vaultReceipt{Joined: in, Ledger: l}), nil
}

var vaultFlow = dex.NewFlow("vault").Start(vaultCollect{}).Steps(vaultSeal{}).
	Attributes(vaultLedger).Channels(vaultNotes, vaultOutbox).RPCs(vaultPeek)

func marker(t *testing.T) string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "PLAINTEXT-" + hex.EncodeToString(b)
}

// filesContaining returns the files under dir whose bytes contain s.
func filesContaining(t *testing.T, dir, s string) []string {
	t.Helper()
	var hits []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(s)) {
			hits = append(hits, strings.TrimPrefix(path, dir))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

var jsonValueRE = regexp.MustCompile(`encoding:\s*"json"`)

// End to end with an AES-GCM codec on the worker and the client: the flow
// runs, the client reads its values back in plaintext, while the server's
// answers to a client without the codec and every byte the server wrote
// (log, store) hold only ciphertext. A flow started by that client in
// plaintext still runs, and shows in the bytes: the scan finds plaintext.
func TestCodec_ServerStoresOnlyCiphertext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	codec, err := dex.NewAESGCMCodec(dex.AESGCMKey{ID: "k1", Key: bytes.Repeat([]byte{7}, dex.AESGCMKeySize)})
	if err != nil {
		t.Fatal(err)
	}
	env := StartWith(t, []*dex.Flow{vaultFlow}, WithCodec(codec))
	secret, plainSecret := marker(t), marker(t)
	c := env.Client()

	if _, err := c.StartFlow(ctx, vaultFlow, "v1", vaultIn{Text: secret + "-input"}, dex.WithAttributes(vaultLedger.Value(secret+"-attr"))); err != nil {
		t.Fatal(err)
	}
	answer, err := dex.InvokeRPC(ctx, c, "v1", vaultPeek, secret+"-rpc")
	if err != nil {
		t.Fatal(err)
	}
	if answer != secret+"-rpc-answer" {
		t.Errorf("RPC answer %q", answer)
	}
	if err := c.Publish(ctx, "v1", []dex.Message{vaultNotes.Message(vaultNote{Text: secret + "-note"})}); err != nil {
		t.Fatal(err)
	}
	res, err := c.WaitForFlow(ctx, "v1")
	if err != nil {
		t.Fatal(err)
	}
	got, err := dex.Output[vaultReceipt](res)
	if err != nil {
		t.Fatal(err)
	}
	if want := (vaultReceipt{Joined: secret + "-input+" + secret + "-note", Ledger: secret + "-attr|" + secret + "-rpc"}); got != want {
		t.Errorf("output %+v, want %+v", got, want)
	}
	st, err := c.GetFlowState(ctx, "v1")
	if err != nil {
		t.Fatal(err)
	}
	var ledger string
	if err := st.Attributes["ledger"].Decode(&ledger); err != nil || ledger != secret+"-attr|"+secret+"-rpc" {
		t.Errorf("ledger read back as %q, %v", ledger, err)
	}

	// What the server hands a client without the codec.
	plain, err := dex.NewClient(dex.ClientOptions{Addresses: []string{env.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = plain.Close() }()
	raw, err := dexraw.FlowState(ctx, plain, "v1")
	if err != nil {
		t.Fatal(err)
	}
	hist, err := dexraw.History(ctx, plain, "v1", dex.HistoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []proto.Message{raw, hist} {
		text := prototext.Format(m)
		if strings.Contains(text, "PLAINTEXT-") || jsonValueRE.MatchString(text) {
			t.Errorf("the server answers plaintext values:\n%s", text)
		}
		if n := strings.Count(text, `"`+dex.EncodingAESGCM+`"`); n < 3 {
			t.Errorf("%d encrypted values in %T, want every value:\n%s", n, m, text)
		}
	}
	pv := dexraw.Value(raw.GetAttributes()[0].GetValue())
	if err := pv.Decode(new(string)); err == nil {
		t.Error("a client without the codec decoded an encrypted value")
	}

	// A client without the codec still starts flows in plaintext (the
	// worker decodes both), and the server still checks the JSON shape of
	// its plaintext values against the worker's declaration.
	if _, err := plain.StartFlow(ctx, vaultFlow, "v2", vaultIn{Text: plainSecret}); err != nil {
		t.Fatal(err)
	}
	err = plain.SetAttributes(ctx, "v2", dex.DefineAttribute[int]("ledger").Value(5))
	if !errors.Is(err, dex.ErrInvalidArgument) {
		t.Errorf("a plaintext attribute of the wrong shape: err = %v, want INVALID_ARGUMENT", err)
	}
	if err := c.SetAttributes(ctx, "v2", vaultLedger.Value(secret+"-attr2")); err != nil {
		t.Errorf("an encrypted attribute refused: %v", err)
	}

	if err := env.Close(); err != nil {
		t.Fatal(err)
	}
	if hits := filesContaining(t, env.dir, secret); len(hits) > 0 {
		t.Errorf("plaintext of the encrypted flow found in %v", hits)
	}
	if hits := filesContaining(t, env.dir, plainSecret); len(hits) == 0 {
		t.Error("the plaintext flow's input is not found in the server's files: the scan cannot see plaintext")
	}
}
