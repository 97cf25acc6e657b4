package session

import (
	"fmt"
	"strconv"

	"github.com/spf13/pflag"
)

// OptUint is a flag holding an unsigned integer of Bits bits (64 when 0)
// that records whether it was given.
type OptUint struct {
	V     uint64
	Given bool
	Bits  int
}

var _ pflag.Value = (*OptUint)(nil)

func (o *OptUint) String() string {
	if o == nil || !o.Given {
		return ""
	}
	return strconv.FormatUint(o.V, 10)
}

// Set parses an unsigned integer.
func (o *OptUint) Set(s string) error {
	bits := o.Bits
	if bits == 0 {
		bits = 64
	}
	v, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		return fmt.Errorf("not an unsigned %d-bit integer", bits)
	}
	o.V, o.Given = v, true
	return nil
}

// Type names the value in help ("uint" when the usage names none).
func (o *OptUint) Type() string { return "uint" }
