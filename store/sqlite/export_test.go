package sqlite

import (
	"context"
	"fmt"
)

// Pragmas reports the settings of the writer and of one reader connection.
func (s *Store) Pragmas(ctx context.Context) map[string]string {
	out := map[string]string{}
	for _, p := range []string{"journal_mode", "synchronous", "foreign_keys", "busy_timeout"} {
		var v string
		if err := s.w.QueryRowContext(ctx, "PRAGMA "+p).Scan(&v); err != nil {
			v = "error: " + err.Error()
		}
		out[p] = v
	}
	var qo string
	if err := s.r.QueryRowContext(ctx, "PRAGMA query_only").Scan(&qo); err != nil {
		qo = "error: " + err.Error()
	}
	out["reader_query_only"] = qo
	out["writer_conns"] = fmt.Sprint(s.w.Stats().MaxOpenConnections)
	return out
}
