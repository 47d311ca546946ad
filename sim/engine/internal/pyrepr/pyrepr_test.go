package pyrepr

import "testing"

func TestStrQuotesAsPythonRepr(t *testing.T) {
	for in, want := range map[string]string{
		"":                "''",
		"Qwen/Qwen3-0.6B": "'Qwen/Qwen3-0.6B'",
		"it's":            `"it's"`,
		`say "hi"`:        `'say "hi"'`,
		`it's "quoted"`:   `'it\'s "quoted"'`,
		"body.messages.0": "'body.messages.0'",
	} {
		if got := Str(in); got != want {
			t.Errorf("Str(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestBoolIsPythonStr(t *testing.T) {
	if Bool(true) != "True" || Bool(false) != "False" {
		t.Fatalf("Bool: %s %s", Bool(true), Bool(false))
	}
}
