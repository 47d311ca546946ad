// Package ansi removes terminal escape sequences from text: routers colour
// their logs and Gomega colours failure messages, and neither belongs in a
// report or a matcher's evidence.
package ansi

import "strings"

// Strip removes terminal escape sequences (CSI colour codes such as
// "\x1b[32m", OSC titles, two-byte escapes).
func Strip(s string) string {
	if !strings.Contains(s, "\x1b") && !strings.Contains(s, "\u009b") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		switch {
		case s[i] == 0x1b && i+1 < len(s) && s[i+1] == '[':
			i = skipCSI(s, i+2)
		case strings.HasPrefix(s[i:], "\u009b"): // 8-bit CSI
			i = skipCSI(s, i+len("\u009b"))
		case s[i] == 0x1b && i+1 < len(s) && s[i+1] == ']':
			i = skipOSC(s, i+2)
		case s[i] == 0x1b:
			i = skipEscape(s, i+1)
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String()
}

// skipCSI skips parameter and intermediate bytes up to the final byte.
func skipCSI(s string, i int) int {
	for i < len(s) {
		c := s[i]
		if c < 0x20 || c > 0x7e { // not a CSI byte: a broken sequence; keep the byte
			return i
		}
		i++
		if c >= 0x40 {
			return i
		}
	}
	return i
}

// skipEscape skips an ECMA-35 escape after ESC: intermediate bytes
// (0x20–0x2F) and one final byte, e.g. "\x1b(B" or "\x1b7". A control
// byte such as '\n' is never swallowed.
func skipEscape(s string, i int) int {
	for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f {
		i++
	}
	if i < len(s) && s[i] >= 0x30 && s[i] <= 0x7e {
		i++
	}
	return i
}

// skipOSC skips to BEL or ST (ESC \), never past the end of the line.
func skipOSC(s string, i int) int {
	for i < len(s) && s[i] != '\n' {
		if s[i] == 0x07 {
			return i + 1
		}
		if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\' {
			return i + 2
		}
		i++
	}
	return i
}
