package store

import (
	"slices"

	"github.com/opencode-server/opencode-server/opencode"
)

// Page cuts one page out of items in ascending order, as MessagesPage
// describes; id names an item. Stores that cannot seek use it.
func Page[T any](items []T, q opencode.PageQuery, id func(T) string) ([]T, error) {
	if q.Desc {
		items = slices.Clone(items)
		slices.Reverse(items)
	}
	start, end := 0, len(items)
	if q.Anchor != "" {
		at := slices.IndexFunc(items, func(x T) bool { return id(x) == q.Anchor })
		if at < 0 {
			return nil, ErrNotFound
		}
		if q.Before {
			end = at
		} else {
			start = at + 1
		}
	}
	if q.Limit > 0 && end-start > q.Limit {
		if q.Before {
			start = end - q.Limit
		} else {
			end = start + q.Limit
		}
	}
	return slices.Clone(items[start:end]), nil
}
