// Package rows is what the SQL stores (store/sqlite, store/postgres) share
// above their drivers: a batch encoded into the JSON their rows hold before
// its transaction begins, and rows decoded back.
package rows

import (
	"encoding/json"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
)

// Encoded is a batch's row JSON, index for index with the batch's slices.
type Encoded struct {
	Session  []byte
	Messages [][]byte
	Parts    [][]byte
	Admit    [][]byte
	Inputs   [][]byte
}

// Encode marshals the rows of b.
func Encode(b *store.Batch) (*Encoded, error) {
	var e Encoded
	var err error
	if b.Session != nil {
		if e.Session, err = json.Marshal(b.Session); err != nil {
			return nil, err
		}
	}
	if e.Messages, err = each(b.Messages); err != nil {
		return nil, err
	}
	if e.Parts, err = each(b.Parts); err != nil {
		return nil, err
	}
	if e.Admit, err = each(b.Admit); err != nil {
		return nil, err
	}
	if e.Inputs, err = each(b.Inputs); err != nil {
		return nil, err
	}
	return &e, nil
}

func each[T any](vs []T) ([][]byte, error) {
	out := make([][]byte, len(vs))
	for i, v := range vs {
		var b []byte
		var err error
		if p, ok := any(v).(opencode.Part); ok {
			// It writes itself compact and escaped, its text once:
			// encoding/json would copy a prompt of megabytes once more.
			b, err = p.MarshalJSON()
		} else {
			b, err = json.Marshal(v)
		}
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

// DecodeInput is an input row: its JSON and its admission order.
func DecodeInput(ord int64, js []byte) (*opencode.Input, error) {
	in := new(opencode.Input)
	if err := json.Unmarshal(js, in); err != nil {
		return nil, err
	}
	in.Order = ord
	return in, nil
}
