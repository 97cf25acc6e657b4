package engine

import (
	"strings"
	"unicode/utf8"
)

// Texts a worker or client sends (failure types, messages and stacks,
// close reasons) are recorded as JSON, which stores invalid UTF-8 as
// U+FFFD. Recording them unchanged would leave the live state holding
// bytes that a replay of the log does not rebuild (and that protobuf
// refuses to serve); so Decide makes every such text valid UTF-8 before it
// goes into a record, and cuts a text that is too long on a character
// boundary. Both are deterministic: the record carries the result.

// validText returns s with every run of invalid UTF-8 bytes replaced by
// U+FFFD; s itself when it is valid.
func validText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// cutText returns validText(s) cut to at most n bytes, on a character
// boundary: the longest prefix of whole characters that fits.
func cutText(s string, n int) string {
	s = validText(s)
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
