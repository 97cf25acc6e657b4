package dex_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/dex"
	"github.com/dexzd/dexzd/dex/dexraw"
)

func testKey(id string, fill byte) dex.AESGCMKey {
	return dex.AESGCMKey{ID: id, Key: bytes.Repeat([]byte{fill}, dex.AESGCMKeySize)}
}

func newCodec(t testing.TB, keys ...dex.AESGCMKey) *dex.AESGCMCodec {
	t.Helper()
	c, err := dex.NewAESGCMCodec(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestAESGCMCodec_RoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCodec(t, testKey("k1", 1))
	for _, p := range []dex.Payload{
		{Encoding: "json", Type: "flows.Order", Data: []byte(`{"id":"secret-42","cents":1200}`)},
		{Encoding: "json", Data: []byte(`null`)},
		{Encoding: "binary", Type: "blob", Data: bytes.Repeat([]byte{0, 255}, 5000)},
		{},
	} {
		enc, err := c.Encode(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if enc.Encoding != dex.EncodingAESGCM || enc.Type != "" {
			t.Errorf("encoded as %q type %q, want %q and no type", enc.Encoding, enc.Type, dex.EncodingAESGCM)
		}
		if len(p.Data) > 0 && bytes.Contains(enc.Data, p.Data) || p.Type != "" && bytes.Contains(enc.Data, []byte(p.Type)) {
			t.Errorf("the encoded value shows the plaintext: %q", enc.Data)
		}
		again, err := c.Encode(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(again.Data, enc.Data) {
			t.Error("two encodings of one value are equal: the nonce is not fresh")
		}
		dec, err := c.Decode(ctx, enc)
		if err != nil {
			t.Fatal(err)
		}
		if dec.Encoding != p.Encoding || dec.Type != p.Type || !bytes.Equal(dec.Data, p.Data) {
			t.Errorf("round trip gave %+v, want %+v", dec, p)
		}
	}
	// Values the codec did not make pass through: plaintext written before
	// encryption was turned on stays readable.
	plain := dex.Payload{Encoding: "json", Type: "int", Data: []byte("7")}
	got, err := c.Decode(ctx, plain)
	if err != nil || got.Encoding != "json" || string(got.Data) != "7" {
		t.Errorf("Decode(plaintext) = %+v, %v; want it unchanged", got, err)
	}
}

// Covers key rotation: a codec with a new current key still decodes the
// values of the old key; one without the new key names it.
func TestAESGCMCodec_KeyRotation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	old := newCodec(t, testKey("2024-01", 1))
	rotated := newCodec(t, testKey("2025-06", 2), testKey("2024-01", 1))
	if rotated.CurrentKeyID() != "2025-06" {
		t.Fatalf("current key %q, want the first", rotated.CurrentKeyID())
	}
	p := dex.Payload{Encoding: "json", Type: "string", Data: []byte(`"before the rotation"`)}
	oldValue, err := old.Encode(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := rotated.Decode(ctx, oldValue)
	if err != nil || string(got.Data) != string(p.Data) {
		t.Fatalf("the rotated codec decodes an old value as %+v, %v", got, err)
	}
	newValue, err := rotated.Encode(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(newValue.Data[:16], []byte("2025-06")) {
		t.Errorf("a new value does not carry the current key ID: %q", newValue.Data[:16])
	}
	_, err = old.Decode(ctx, newValue)
	if err == nil || !strings.Contains(err.Error(), `"2025-06"`) {
		t.Errorf("a codec without the new key decoded a new value, or did not name the key: %v", err)
	}
	// The same key under another ID is refused: the key ID is authenticated.
	renamed := newCodec(t, testKey("other", 1))
	forged := append([]byte(nil), oldValue.Data...)
	forged = append(append([]byte{forged[0], byte(len("other"))}, "other"...), forged[2+len("2024-01"):]...)
	if _, err := renamed.Decode(ctx, dex.Payload{Encoding: dex.EncodingAESGCM, Data: forged}); err == nil {
		t.Error("a value whose key ID was changed decoded")
	}
}

func TestAESGCMCodec_RefusesAlteredValues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCodec(t, testKey("k1", 1))
	enc, err := c.Encode(ctx, dex.Payload{Encoding: "json", Data: []byte(`{"cents":1200}`)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range enc.Data {
		bad := append([]byte(nil), enc.Data...)
		bad[i] ^= 0x01
		if _, err := c.Decode(ctx, dex.Payload{Encoding: dex.EncodingAESGCM, Data: bad}); err == nil {
			t.Fatalf("a value with byte %d altered decoded", i)
		}
	}
	for n := range len(enc.Data) {
		if _, err := c.Decode(ctx, dex.Payload{Encoding: dex.EncodingAESGCM, Data: enc.Data[:n]}); err == nil {
			t.Fatalf("a value truncated to %d bytes decoded", n)
		}
	}
}

// goldenValue was encrypted by the first version of the format, with key
// "golden" = 32 bytes of 0x07: a change of the format that would leave
// stored values unreadable fails here.
const goldenValue = "AQZnb2xkZW76I29E4VVOs8WaCmvW3e9ZQYoau0GvvbZQCTLQJU88PGwfS49BJATEeHTki5QAGFVl5FcR5nkz/wQK38I="

func TestAESGCMCodec_DecodesTheFirstFormat(t *testing.T) {
	t.Parallel()
	c := newCodec(t, testKey("new", 9), testKey("golden", 7))
	data, err := base64.StdEncoding.DecodeString(goldenValue)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Decode(context.Background(), dex.Payload{Encoding: "aes256-gcm", Data: data})
	if err != nil {
		t.Fatal(err)
	}
	if got.Encoding != "json" || got.Type != "flows.Order" || string(got.Data) != `{"id":"42"}` {
		t.Errorf("golden value decoded as %+v", got)
	}
}

func TestNewAESGCMCodec_Refuses(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		keys []dex.AESGCMKey
		want string
	}{
		{"no keys", nil, "no keys"},
		{"short key", []dex.AESGCMKey{{ID: "a", Key: make([]byte, 16)}}, `key "a" is 16 bytes, want 32`},
		{"empty ID", []dex.AESGCMKey{{Key: make([]byte, 32)}}, "key 1: key ID"},
		{"ID with a colon", []dex.AESGCMKey{{ID: "a:b", Key: make([]byte, 32)}}, `':' is not`},
		{"duplicate", []dex.AESGCMKey{testKey("a", 1), testKey("a", 2)}, `"a" is given twice`},
	} {
		_, err := dex.NewAESGCMCodec(tt.keys...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestParseAESGCMKeys(t *testing.T) {
	t.Parallel()
	k1 := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))
	k2 := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{2}, 32))
	keys, err := dex.ParseAESGCMKeys([]byte("# rotated 2025-06\n\n k2 : " + k2 + "\nk1:" + k1 + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0].ID != "k2" || keys[1].ID != "k1" || keys[0].Key[0] != 2 {
		t.Fatalf("keys %v", keys)
	}
	short := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef"))
	for _, tt := range []struct{ text, want string }{
		{"", "no keys"},
		{"# only a comment\n", "no keys"},
		{"k1 " + k1, "line 1: want ID:BASE64KEY"},
		{"k1:" + k1 + "\nk2:not base64!", `line 2: key "k2" is not standard base64`},
		{"k1:" + short, `line 1: key "k1" is 16 bytes, want 32`},
		{"bad id:" + k1, "line 1: key ID"},
	} {
		_, err := dex.ParseAESGCMKeys([]byte(tt.text))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: err = %v, want %q", tt.text, err, tt.want)
		}
		if err != nil && (strings.Contains(err.Error(), k1) || strings.Contains(err.Error(), short)) {
			t.Errorf("the error shows a key: %v", err)
		}
	}
}

// A worker with a codec decodes a task's values before the handler runs,
// encodes its result's values, and fails the attempt with a CodecError
// naming the value and the key when a value does not decode.
func TestWorkerCodec_DecodesTasksAndEncodesResults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCodec(t, testKey("k1", 1))
	total := dex.DefineAttribute[int]("total")
	add := dex.DefineRPC("add", func(ctx dex.Context, n int) (int, error) {
		v, err := total.Get(ctx)
		if err != nil {
			return 0, err
		}
		total.Set(ctx, v+n)
		return v + n, nil
	})
	flow := dex.NewFlow("adder").Attributes(total).RPCs(add)
	w, err := dex.NewWorker(dex.WorkerOptions{Addresses: []string{"127.0.0.1:1"}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Codec: c}, flow)
	if err != nil {
		t.Fatal(err)
	}
	enc := func(json string) *dexpb.EncodedValue {
		p, err := c.Encode(ctx, dex.Payload{Encoding: "json", Type: "int", Data: []byte(json)})
		if err != nil {
			t.Fatal(err)
		}
		return &dexpb.EncodedValue{Encoding: p.Encoding, Type: p.Type, Data: p.Data}
	}
	task := func(in, attr *dexpb.EncodedValue) *dexpb.Task {
		return &dexpb.Task{Kind: dexpb.TaskKind(dex.KindRPC), TaskToken: []byte("t"), FlowType: "adder", FlowId: "a", RunId: "r",
			RpcName: "add", Input: in, Attributes: []*dexpb.Attribute{{Name: "total", Value: attr}}}
	}
	res := dexraw.HandleTask(ctx, w, task(enc("5"), enc("37"))).GetTaskResult()
	if res == nil {
		t.Fatal("the task failed")
	}
	out := res.GetRpc().GetOutput()
	write := res.GetWrites().GetAttributeWrites()[0].GetValue()
	for _, ev := range []*dexpb.EncodedValue{out, write} {
		if ev.GetEncoding() != dex.EncodingAESGCM || bytes.Contains(ev.GetData(), []byte("42")) {
			t.Errorf("result value %v is not encrypted", ev)
		}
		p, err := c.Decode(ctx, dex.Payload{Encoding: ev.GetEncoding(), Data: ev.GetData()})
		if err != nil || string(p.Data) != "42" || p.Type != "int" {
			t.Errorf("result value decodes as %+v, %v; want 42", p, err)
		}
	}
	// A plaintext value (written before the codec was set) still decodes.
	if res := dexraw.HandleTask(ctx, w, task(&dexpb.EncodedValue{Encoding: "json", Data: []byte("1")}, enc("1"))).GetTaskResult(); res == nil {
		t.Error("a task with a plaintext input failed")
	}

	other := newCodec(t, testKey("k9", 9))
	p, err := other.Encode(ctx, dex.Payload{Encoding: "json", Data: []byte("1")})
	if err != nil {
		t.Fatal(err)
	}
	f := dexraw.HandleTask(ctx, w, task(enc("1"), &dexpb.EncodedValue{Encoding: p.Encoding, Data: p.Data})).GetTaskFailure()
	if f == nil {
		t.Fatal("a task with a value of an unknown key succeeded")
	}
	if f.GetErrorType() != "dex.CodecError" || !strings.Contains(f.GetMessage(), "task.attributes[0].value") || !strings.Contains(f.GetMessage(), `"k9"`) {
		t.Errorf("failure %q %q: want dex.CodecError naming task.attributes[0].value and key k9", f.GetErrorType(), f.GetMessage())
	}
}

// With a codec, the worker declares its value types with any encoding and
// keeps their JSON shapes.
func TestWorkerCodec_DeclaresTypesWithoutEncoding(t *testing.T) {
	t.Parallel()
	total := dex.DefineAttribute[int]("total")
	get := dex.DefineRPC("get", func(ctx dex.Context, _ struct{}) (int, error) { return total.Get(ctx) })
	flow := dex.NewFlow("adder").Attributes(total).RPCs(get)
	for _, codec := range []dex.Codec{nil, newCodec(t, testKey("k1", 1))} {
		w, err := dex.NewWorker(dex.WorkerOptions{Addresses: []string{"127.0.0.1:1"}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Codec: codec}, flow)
		if err != nil {
			t.Fatal(err)
		}
		vt := dexraw.Hello(w).GetFlowTypes()[0].GetAttributeTypes()["total"]
		want := "json"
		if codec != nil {
			want = ""
		}
		if vt.GetEncoding() != want || vt.GetJsonShape().GetKind() != dexpb.JsonKind_JSON_KIND_INTEGER {
			t.Errorf("codec %v: declared %v, want encoding %q and the integer shape", codec != nil, vt, want)
		}
	}
}

// A Codec's error fails a client's call before anything is sent, as a
// *CodecError naming the value.
func TestClientCodec_EncodeErrorFailsTheCall(t *testing.T) {
	t.Parallel()
	boom := errors.New("no key service")
	c, err := dex.NewClient(dex.ClientOptions{Addresses: []string{"127.0.0.1:1"}, Codec: failingCodec{boom}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	err = c.SetAttributes(context.Background(), "a", dex.DefineAttribute[int]("total").Value(1))
	var ce *dex.CodecError
	if !errors.As(err, &ce) || !errors.Is(err, boom) || ce.Op != "encode" || ce.Field != "attributes[0].value" {
		t.Fatalf("err = %v, want a CodecError encoding attributes[0].value", err)
	}
}

type failingCodec struct{ err error }

func (f failingCodec) Encode(context.Context, dex.Payload) (dex.Payload, error) {
	return dex.Payload{}, f.err
}

func (f failingCodec) Decode(_ context.Context, p dex.Payload) (dex.Payload, error) { return p, nil }

func BenchmarkAESGCMCodec(b *testing.B) {
	ctx := context.Background()
	c := newCodec(b, testKey("k1", 1))
	for _, size := range []int{100, 64 << 10, 4 << 20} {
		p := dex.Payload{Encoding: "json", Type: "flows.Order", Data: bytes.Repeat([]byte("a"), size)}
		b.Run(byteSize(size), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				enc, err := c.Encode(ctx, p)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := c.Decode(ctx, enc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func byteSize(n int) string {
	switch {
	case n >= 1<<20:
		return strconv.Itoa(n>>20) + "MiB"
	case n >= 1<<10:
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}

// FuzzAESGCMDecode: Decode never panics on any bytes, and a value it
// accepts is one the key encrypted (the fuzzer cannot forge the tag), so
// only the seeds, real encryptions, decode.
func FuzzAESGCMDecode(f *testing.F) {
	c := newCodec(f, testKey("k1", 1))
	ctx := context.Background()
	for _, plain := range []string{"", "1", `{"id":"42"}`} {
		p, err := c.Encode(ctx, dex.Payload{Encoding: "json", Type: "T", Data: []byte(plain)})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(p.Data)
	}
	f.Add([]byte{1, 2, 'k', '1'})
	f.Add([]byte{1, 255})
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := c.Decode(ctx, dex.Payload{Encoding: dex.EncodingAESGCM, Data: data})
		if err != nil {
			return
		}
		if p.Encoding != "json" || p.Type != "T" {
			t.Fatalf("decoded %+v from bytes that are no encryption of the seeds", p)
		}
	})
}
