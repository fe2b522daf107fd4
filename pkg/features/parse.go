package features

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// The parsers return short reasons of their own rather than strconv's errors,
// which repeat the value; valueError already names the variable and value.

func parseBool(s string) (bool, error) {
	v, err := strconv.ParseBool(strings.TrimSpace(s))
	if err != nil {
		return false, errors.New("want true or false (also accepted: 1, t, TRUE, 0, f, FALSE)")
	}
	return v, nil
}

func parseString(s string) (string, error) { return s, nil }

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, errors.New("want a duration with a unit, such as 30s, 500ms or 1m30s")
	}
	if d <= 0 {
		return 0, errors.New("must be positive")
	}
	return d, nil
}

func parseInt(s string) (int, error) {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, errors.New("out of range for an int")
		}
		return 0, errors.New("want a base-10 integer")
	}
	return v, nil
}

func strconvFormatBool(v bool) string       { return strconv.FormatBool(v) }
func formatString(v string) string          { return v }
func formatDuration(v time.Duration) string { return v.String() }
func formatInt(v int) string                { return strconv.Itoa(v) }
