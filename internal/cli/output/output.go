package output

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/dexzd/dexzd/api/dexpb"
)

// Printer writes a command's result to stdout: one JSON document with
// --output json, text for people otherwise.
type Printer struct {
	W    io.Writer
	JSON bool // --output json
}

// Document writes v as one indented JSON document.
func (p *Printer) Document(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	_, err = p.W.Write(append(b, '\n'))
	return err
}

// Field is one field of an Object. It is an alias of an unnamed struct
// type so that other packages can write the fields of an Object as
// {"key", value} pairs.
type Field = struct {
	Key   string
	Value any
}

// Object is a JSON object whose fields keep their order, so that the
// JSON output is byte-for-byte stable.
type Object []Field

// Add returns o with the field key set to v.
func (o Object) Add(key string, v any) Object {
	return append(o, Field{key, v})
}

// MarshalJSON writes the fields in order.
func (o Object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(f.Key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(f.Value)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", f.Key, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// ValueJSON renders an encoded value for JSON output: its encoding, its
// type when it has one, and the value itself as JSON ("json") when the
// encoding is json, else its bytes as base64 ("base64").
func ValueJSON(v *dexpb.EncodedValue) Object {
	enc := v.GetEncoding()
	if enc == "" {
		enc = "binary"
	}
	o := Object{{"encoding", enc}}
	if t := v.GetType(); t != "" {
		o = o.Add("type", t)
	}
	if j, ok := jsonData(v); ok {
		return o.Add("json", json.RawMessage(j))
	}
	return o.Add("base64", base64.StdEncoding.EncodeToString(v.GetData()))
}

// jsonData returns a json value's data, compacted, when it is valid JSON.
func jsonData(v *dexpb.EncodedValue) ([]byte, bool) {
	if v.GetEncoding() != "json" {
		return nil, false
	}
	var b bytes.Buffer
	if err := json.Compact(&b, v.GetData()); err != nil {
		return nil, false
	}
	return b.Bytes(), true
}

// ValueText renders an encoded value for people: JSON text when the
// encoding is json, else base64 with the encoding and the type.
func ValueText(v *dexpb.EncodedValue) string {
	if v == nil {
		return "-"
	}
	if j, ok := jsonData(v); ok {
		return string(j)
	}
	enc := v.GetEncoding()
	if enc == "" {
		enc = "binary"
	}
	if t := v.GetType(); t != "" {
		enc += " " + t
	}
	return fmt.Sprintf("(%s) base64:%s", enc, base64.StdEncoding.EncodeToString(v.GetData()))
}

// JSONValue is an encoded value for JSON output, or nil when unset.
func JSONValue(v *dexpb.EncodedValue) any {
	if v == nil {
		return nil
	}
	return ValueJSON(v)
}

// TextTime renders a timestamp for people, in UTC with milliseconds.
func TextTime(t *timestamppb.Timestamp) string {
	if t == nil {
		return "-"
	}
	return t.AsTime().UTC().Format("2006-01-02T15:04:05.000Z")
}

// TextDuration renders a duration for people ("1m30s").
func TextDuration(d *durationpb.Duration) string {
	if d == nil {
		return "-"
	}
	return d.AsDuration().String()
}

// EnumText is an enum value's name without its type prefix
// (FLOW_STATUS_COMPLETED is COMPLETED).
func EnumText(e protoreflect.Enum) string {
	return enumName(e.Descriptor(), e.Number())
}

// KeyValues prints aligned "key  value" lines.
func KeyValues(w io.Writer, kv ...string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(tw, "%s\t%s\n", kv[i], kv[i+1])
	}
	return tw.Flush()
}

// table prints a table with a header row.
func Table(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// OrDash is s, or "-" when s is empty.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// StartProgress shows a spinner with the elapsed time on w while a long
// call runs, when w is a terminal; otherwise it shows nothing. The returned
// function stops it and clears the line.
func StartProgress(w io.Writer, label string) (stop func()) {
	if !IsTerminal(w) {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		start := time.Now()
		tick := time.NewTicker(150 * time.Millisecond)
		defer tick.Stop()
		frames := `|/-\`
		for n := 0; ; n++ {
			elapsed := time.Since(start).Truncate(time.Second)
			fmt.Fprintf(w, "\r%c %s (%s)\x1b[K", frames[n%len(frames)], label, elapsed)
			select {
			case <-done:
				fmt.Fprint(w, "\r\x1b[K")
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
	}
}
