package ansi

import "testing"

func TestStrip(t *testing.T) {
	in := "\x1b[2m2026\x1b[0m \x1b[32m INFO\x1b[0m \x1b[1;38;5;208mx\x1b[m\x1b]0;title\x07y\x1b(Bz"
	if got := Strip(in); got != "2026  INFO xyz" {
		t.Errorf("Strip = %q", got)
	}
	if got := Strip("a\x1b[3\nb"); got != "a\nb" {
		t.Errorf("broken CSI ate the newline: %q", got)
	}
}
