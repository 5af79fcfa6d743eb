package transport

import (
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/transport/wire"
)

// Zero limits take the defaults, a large frame gets a queue that holds it,
// and each bad limit is named.
func TestLimits(t *testing.T) {
	if err := DefaultLimits().Validate(); err != nil {
		t.Fatal(err)
	}
	if l := (Limits{}).WithDefaults(); l != DefaultLimits() {
		t.Errorf("zero limits with defaults: %+v", l)
	}
	big := Limits{MaxFrame: 4 * wire.DefaultMaxFrame, WriteTimeout: time.Second}.WithDefaults()
	if big.MaxQueue != big.MaxFrame+wire.HeaderSize || big.WriteTimeout != time.Second || big.Validate() != nil {
		t.Errorf("a large frame: %+v", big)
	}
	for want, l := range map[string]Limits{
		"MaxFrame":         {MaxFrame: 0, HandshakeTimeout: 1, DialTimeout: 1, WriteTimeout: 1, MaxQueue: 1 << 20},
		"HandshakeTimeout": {MaxFrame: 1, DialTimeout: 1, WriteTimeout: 1, MaxQueue: 1 << 20},
		"DialTimeout":      {MaxFrame: 1, HandshakeTimeout: 1, WriteTimeout: 1, MaxQueue: 1 << 20},
		"WriteTimeout":     {MaxFrame: 1, HandshakeTimeout: 1, DialTimeout: 1, MaxQueue: 1 << 20},
		"MaxQueue":         {MaxFrame: 1 << 20, HandshakeTimeout: 1, DialTimeout: 1, WriteTimeout: 1, MaxQueue: 1 << 20},
	} {
		if err := l.Validate(); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
}
