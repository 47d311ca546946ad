package argparse

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Int checks type=int.
func Int(v string) error {
	if _, err := strconv.Atoi(strings.TrimSpace(v)); err != nil {
		return fmt.Errorf("invalid int value: '%s'", v)
	}
	return nil
}

// Float checks type=float.
func Float(v string) error {
	if _, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
		return fmt.Errorf("invalid float value: '%s'", v)
	}
	return nil
}

// JSON checks a value vLLM parses as JSON (config dicts): it must start like
// an object or array. (vLLM's own parser reports json.loads' message; the
// sim only needs to refuse obvious non-JSON.)
func JSON(v string) error {
	t := strings.TrimSpace(v)
	if strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
		return nil
	}
	return fmt.Errorf("invalid loads value: '%s'", v)
}

var humanRE = regexp.MustCompile(`^(\d+(?:\.\d+)?)([kKmMgGtT])$`)

// HumanInt parses vLLM's human_readable_int: "1k" = 1000, "1K" = 1024,
// "25.6k" = 25600, plain integers as is.
func HumanInt(v string) (int, error) {
	s := strings.TrimSpace(v)
	if m := humanRE.FindStringSubmatch(s); m != nil {
		num, suffix := m[1], m[2]
		dec := map[string]float64{"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
		bin := map[string]int{"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
		if mult, ok := dec[suffix]; ok {
			f, _ := strconv.ParseFloat(num, 64)
			return int(f * mult), nil
		}
		n, err := strconv.Atoi(num)
		if err != nil {
			return 0, fmt.Errorf("invalid human_readable_int value: '%s'", v)
		}
		return n * bin[suffix], nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("invalid human_readable_int value: '%s'", v)
	}
	return n, nil
}

// CheckHumanInt is HumanInt as a Check.
func CheckHumanInt(v string) error { _, err := HumanInt(v); return err }

// IntValue returns dest's value as an int (already checked by Int), or def.
func (r *Result) IntValue(dest string, def int) int {
	v := r.String(dest, "")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		if h, herr := HumanInt(v); herr == nil {
			return h
		}
		return def
	}
	return n
}

// FloatValue returns dest's value as a float64, or def.
func (r *Result) FloatValue(dest string, def float64) float64 {
	v := r.String(dest, "")
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil {
		return def
	}
	return f
}
