// Package choice parses a flag value that must be one of a fixed list.
package choice

import (
	"fmt"
	"strings"
)

// Parse returns the element of all spelled s, or def for "". Anything else
// is an error wrapping base that names s and every choice, in all's order.
func Parse[T ~string](s string, all []T, def T, base error) (T, error) {
	if s == "" {
		return def, nil
	}
	for _, c := range all {
		if string(c) == s {
			return c, nil
		}
	}
	names := make([]string, len(all))
	for i, c := range all {
		names[i] = string(c)
	}
	var zero T
	return zero, fmt.Errorf("%w %q: choose one of %s", base, s, strings.Join(names, ", "))
}

// Resolve returns c itself, except for the choice def ("default"), which
// becomes row (an arch row's measured choice) or, where row is empty, host.
func Resolve[T ~string](c, def T, row string, host T) T {
	if c != def {
		return c
	}
	if row != "" {
		return T(row)
	}
	return host
}
