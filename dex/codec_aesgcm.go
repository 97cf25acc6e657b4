package dex

import (
	"bufio"
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/dexzd/dexzd/api/dexpb"
)

// EncodingAESGCM is the encoding of the values an AESGCMCodec made.
const EncodingAESGCM = "aes256-gcm"

// AESGCMKeySize is the size of an AESGCMCodec's keys: AES-256.
const AESGCMKeySize = 32

// maxKeyIDLen bounds a key ID, which every value carries.
const maxKeyIDLen = 64

// aesGCMFormat is the first byte of the data of every value an AESGCMCodec
// made; another format gets another byte.
const aesGCMFormat = 1

// AESGCMKey is one key of an AESGCMCodec: an ID, carried by every value
// the key encrypted so that the value is decrypted with the same key
// later, and 32 bytes of key.
type AESGCMKey struct {
	ID  string
	Key []byte
}

// AESGCMCodec encrypts values with AES-256-GCM. It encrypts with its
// current key and decrypts with any of its keys, chosen by the key ID a
// value carries, so keys can rotate: add a new key to every worker and
// client first, make it current next, and drop an old key only once no
// stored value needs it (no run whose values it encrypted is still read).
//
// An encrypted value has encoding EncodingAESGCM, no type name, and data
//
//	0x01 | len(keyID) (1 byte) | keyID | nonce (12 bytes) | ciphertext+tag
//
// where the plaintext is the original value (encoding, type and data) as
// a serialized dex.EncodedValue, the nonce is random, and the bytes before
// the nonce are the additional authenticated data, so a value altered in
// the store (or its key ID) fails to decrypt. Values of any other encoding
// are decoded unchanged.
type AESGCMCodec struct {
	current string
	aeads   map[string]cipher.AEAD
}

var _ Codec = (*AESGCMCodec)(nil)

// NewAESGCMCodec returns a codec that encrypts with keys[0] and decrypts
// with any of keys. Key IDs are 1 to 64 bytes of letters, digits, '.',
// '_' and '-', unique; keys are AESGCMKeySize bytes.
func NewAESGCMCodec(keys ...AESGCMKey) (*AESGCMCodec, error) {
	if len(keys) == 0 {
		return nil, errors.New("dex: AES-GCM codec: no keys")
	}
	c := &AESGCMCodec{current: keys[0].ID, aeads: make(map[string]cipher.AEAD, len(keys))}
	for i, k := range keys {
		if err := checkKeyID(k.ID); err != nil {
			return nil, fmt.Errorf("dex: AES-GCM codec: key %d: %w", i+1, err)
		}
		if _, dup := c.aeads[k.ID]; dup {
			return nil, fmt.Errorf("dex: AES-GCM codec: key ID %q is given twice", k.ID)
		}
		if len(k.Key) != AESGCMKeySize {
			return nil, fmt.Errorf("dex: AES-GCM codec: key %q is %d bytes, want %d", k.ID, len(k.Key), AESGCMKeySize)
		}
		block, err := aes.NewCipher(k.Key)
		if err != nil {
			return nil, fmt.Errorf("dex: AES-GCM codec: key %q: %w", k.ID, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("dex: AES-GCM codec: key %q: %w", k.ID, err)
		}
		c.aeads[k.ID] = aead
	}
	return c, nil
}

func checkKeyID(id string) error {
	if id == "" || len(id) > maxKeyIDLen {
		return fmt.Errorf("key ID %q must be 1 to %d bytes", id, maxKeyIDLen)
	}
	for _, r := range id {
		if !keyIDRune(r) {
			return fmt.Errorf("key ID %q: %q is not a letter, digit, '.', '_' or '-'", id, r)
		}
	}
	return nil
}

func keyIDRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
}

// CurrentKeyID is the ID of the key the codec encrypts with.
func (c *AESGCMCodec) CurrentKeyID() string { return c.current }

// Encode encrypts p with the current key.
func (c *AESGCMCodec) Encode(_ context.Context, p Payload) (Payload, error) {
	plain, err := proto.Marshal(&dexpb.EncodedValue{Encoding: p.Encoding, Type: p.Type, Data: p.Data})
	if err != nil {
		return Payload{}, err
	}
	aead := c.aeads[c.current]
	hdr := 2 + len(c.current)
	out := make([]byte, hdr+aead.NonceSize(), hdr+aead.NonceSize()+len(plain)+aead.Overhead())
	out[0] = aesGCMFormat
	out[1] = byte(len(c.current))
	copy(out[2:], c.current)
	nonce := out[hdr:]
	if _, err := rand.Read(nonce); err != nil {
		return Payload{}, err
	}
	out = aead.Seal(out, nonce, plain, out[:hdr])
	return Payload{Encoding: EncodingAESGCM, Data: out}, nil
}

// Decode decrypts a value the codec (or one with the same key) encrypted;
// a value of another encoding is returned unchanged. A value whose key ID
// the codec does not hold, or whose bytes were altered, is an error.
func (c *AESGCMCodec) Decode(_ context.Context, p Payload) (Payload, error) {
	if p.Encoding != EncodingAESGCM {
		return p, nil
	}
	d := p.Data
	if len(d) < 2 || d[0] != aesGCMFormat {
		return Payload{}, fmt.Errorf("%s value: unknown format (%d bytes)", EncodingAESGCM, len(d))
	}
	hdr := 2 + int(d[1])
	if len(d) < hdr {
		return Payload{}, fmt.Errorf("%s value: truncated key ID", EncodingAESGCM)
	}
	id := string(d[2:hdr])
	aead := c.aeads[id]
	if aead == nil {
		return Payload{}, fmt.Errorf("%s value: encrypted with key %q, which this codec does not hold (it holds %s)", EncodingAESGCM, id, c.keyList())
	}
	if len(d) < hdr+aead.NonceSize()+aead.Overhead() {
		return Payload{}, fmt.Errorf("%s value: truncated (%d bytes)", EncodingAESGCM, len(d))
	}
	nonce := d[hdr : hdr+aead.NonceSize()]
	plain, err := aead.Open(nil, nonce, d[hdr+aead.NonceSize():], d[:hdr])
	if err != nil {
		return Payload{}, fmt.Errorf("%s value: decrypt with key %q: %w (the value was altered, or another key has this ID)", EncodingAESGCM, id, err)
	}
	var ev dexpb.EncodedValue
	if err := proto.Unmarshal(plain, &ev); err != nil {
		return Payload{}, fmt.Errorf("%s value: decrypted bytes: %w", EncodingAESGCM, err)
	}
	return Payload{Encoding: ev.GetEncoding(), Type: ev.GetType(), Data: ev.GetData()}, nil
}

func (c *AESGCMCodec) keyList() string {
	ids := make([]string, 0, len(c.aeads))
	for id := range c.aeads {
		ids = append(ids, fmt.Sprintf("%q", id))
	}
	slices.Sort(ids)
	return strings.Join(ids, ", ")
}

// ParseAESGCMKeys reads a key file's text: one key per line, "ID:KEY"
// with KEY the 32 bytes in standard base64; blank lines and lines starting
// with '#' are ignored. The first key is the current one. A line is
// generated with
//
//	echo "k2:$(head -c 32 /dev/urandom | base64)"
//
// Errors name the line but never show a key.
func ParseAESGCMKeys(text []byte) ([]AESGCMKey, error) {
	var keys []AESGCMKey
	sc := bufio.NewScanner(bytes.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, b64, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("line %d: want ID:BASE64KEY", n)
		}
		id = strings.TrimSpace(id)
		if err := checkKeyID(id); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
		if err != nil {
			return nil, fmt.Errorf("line %d: key %q is not standard base64", n, id)
		}
		if len(key) != AESGCMKeySize {
			return nil, fmt.Errorf("line %d: key %q is %d bytes, want %d", n, id, len(key), AESGCMKeySize)
		}
		keys = append(keys, AESGCMKey{ID: id, Key: key})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, errors.New("no keys")
	}
	return keys, nil
}

// LoadAESGCMCodec reads a key file (ParseAESGCMKeys) and returns its codec:
// the file's first key encrypts, every key decrypts.
func LoadAESGCMCodec(path string) (*AESGCMCodec, error) {
	b, err := os.ReadFile(path) //nolint:gosec // the caller names its key file
	if err != nil {
		return nil, fmt.Errorf("dex: read codec key file: %w", err)
	}
	keys, err := ParseAESGCMKeys(b)
	if err != nil {
		return nil, fmt.Errorf("dex: codec key file %s: %w", path, err)
	}
	return NewAESGCMCodec(keys...)
}
