package session

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dexzd/dexzd/dex"
)

// CodecKeyFileEnv is the --codec-key-file default.
const CodecKeyFileEnv = "DEX_CODEC_KEY_FILE"

// loadCodec reads --codec-key-file, when given, into the session's
// connections: the values dexcli sends are encrypted with the file's first
// key and the values it reads are decrypted with any of its keys, as the
// workers' dex.AESGCMCodec does (payload encryption). A file that cannot
// be read or parsed is a usage error naming the flag; the error never
// shows a key.
func (s *Session) loadCodec() error {
	path := s.Opts.CodecKeyFile
	if path == "" {
		return nil
	}
	c, err := dex.LoadAESGCMCodec(path)
	if err != nil {
		return Usagef("--codec-key-file: %v", err)
	}
	s.conns.codec = c
	return nil
}

// codecFailure is the Failure of a value that --codec-key-file's codec
// could not encode or decode (nil for other errors): the call itself went
// through, so the message carries no gRPC code and the hint is about the
// key file.
func (s *Session) codecFailure(err error, info CallInfo) *Failure {
	var ce *dex.CodecError
	if !errors.As(err, &ce) {
		return nil
	}
	hint := "the value is encrypted with a key that --codec-key-file does not hold, or was altered; pass the key file the workers use"
	if ce.Op == "encode" {
		hint = "dexcli could not encrypt the value with --codec-key-file's current key"
	}
	return &Failure{
		Msg:       fmt.Sprintf("%s: %v", strings.Join(s.Words, " "), err),
		ServerMsg: err.Error(),
		Hint:      hint,
		Detail:    info.Detail,
		Fields:    info.Fields,
	}
}
