package options

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Text forms shared by the option table's rows.

func parseBool(v string) (bool, error) {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errors.New("want true or false")
	}
	return b, nil
}

// intRange parses an integer in [lo, hi].
func intRange(v string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("want an integer from %d to %d", lo, hi)
	}
	return n, nil
}

func countOrAll(v string) (int, error) {
	if v == "all" {
		return All, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, errors.New(`want "all" or an integer >= 0`)
	}
	return n, nil
}

func formatCountOrAll(n int) string {
	if n == All {
		return "all"
	}
	return strconv.Itoa(n)
}

func duration(v string, positive bool) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		return 0, errors.New("want a duration such as 500ms, 5s or 2m")
	case positive && d <= 0:
		return 0, errors.New("want a duration > 0")
	case d < 0:
		return 0, errors.New("want a duration >= 0")
	}
	return d, nil
}

// autoDuration is a duration >= 0, or "auto" (Auto: the scenario decides,
// see ResolveAuto).
func autoDuration(v string) (time.Duration, error) {
	if v == "auto" {
		return Auto, nil
	}
	return duration(v, false)
}

// autoString prints a duration that may be Auto.
func autoString(d time.Duration) string {
	if d == Auto {
		return "auto"
	}
	return d.String()
}
