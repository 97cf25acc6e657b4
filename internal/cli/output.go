package cli

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

// printer writes a command's result to stdout: one JSON document with
// --output json, text for people otherwise.
type printer struct {
	w    io.Writer
	json bool
}

// document writes v as one indented JSON document.
func (p *printer) document(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	_, err = p.w.Write(append(b, '\n'))
	return err
}

// jsonField is one field of a jsonObject.
type jsonField struct {
	key   string
	value any
}

// jsonObject is a JSON object whose fields keep their order, so that the
// JSON output is byte-for-byte stable.
type jsonObject []jsonField

// add returns o with the field key set to v.
func (o jsonObject) add(key string, v any) jsonObject {
	return append(o, jsonField{key, v})
}

// MarshalJSON writes the fields in order.
func (o jsonObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(f.key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(f.value)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", f.key, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// valueJSON renders an encoded value for JSON output: its encoding, its
// type when it has one, and the value itself as JSON ("json") when the
// encoding is json, else its bytes as base64 ("base64").
func valueJSON(v *dexpb.EncodedValue) jsonObject {
	enc := v.GetEncoding()
	if enc == "" {
		enc = "binary"
	}
	o := jsonObject{{"encoding", enc}}
	if t := v.GetType(); t != "" {
		o = o.add("type", t)
	}
	if j, ok := jsonData(v); ok {
		return o.add("json", json.RawMessage(j))
	}
	return o.add("base64", base64.StdEncoding.EncodeToString(v.GetData()))
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

// valueText renders an encoded value for people: JSON text when the
// encoding is json, else base64 with the encoding and the type.
func valueText(v *dexpb.EncodedValue) string {
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

// jsonValue is an encoded value for JSON output, or nil when unset.
func jsonValue(v *dexpb.EncodedValue) any {
	if v == nil {
		return nil
	}
	return valueJSON(v)
}

// textTime renders a timestamp for people, in UTC with milliseconds.
func textTime(t *timestamppb.Timestamp) string {
	if t == nil {
		return "-"
	}
	return t.AsTime().UTC().Format("2006-01-02T15:04:05.000Z")
}

// textDuration renders a duration for people ("1m30s").
func textDuration(d *durationpb.Duration) string {
	if d == nil {
		return "-"
	}
	return d.AsDuration().String()
}

// enumText is an enum value's name without its type prefix
// (FLOW_STATUS_COMPLETED is COMPLETED).
func enumText(e protoreflect.Enum) string {
	return enumName(e.Descriptor(), e.Number())
}

// keyValues prints aligned "key  value" lines.
func keyValues(w io.Writer, kv ...string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(tw, "%s\t%s\n", kv[i], kv[i+1])
	}
	return tw.Flush()
}

// table prints a table with a header row.
func table(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// orDash is s, or "-" when s is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// startProgress shows a spinner with the elapsed time on w while a long
// call runs, when w is a terminal; otherwise it shows nothing. The returned
// function stops it and clears the line.
func startProgress(w io.Writer, label string) (stop func()) {
	if !isTerminal(w) {
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
