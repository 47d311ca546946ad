// Package pyrepr prints values the way the engines' Python code shows them
// in log lines and validation messages: repr() of a str, str() of a bool.
// (repr() of a float is jsonw.PyRepr, since json.dumps writes floats the
// same way.)
package pyrepr

import "strings"

// Str is repr(s): single quotes, or double quotes when s holds a single
// quote and no double quote.
func Str(s string) string {
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		return `"` + s + `"`
	}
	return "'" + strings.ReplaceAll(s, "'", `\'`) + "'"
}

// Bool is str(b): True or False.
func Bool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}
