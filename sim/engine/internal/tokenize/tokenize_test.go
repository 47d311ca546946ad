package tokenize

import (
	"strings"
	"testing"
)

func TestFourBytesPerTokenRoundedUp(t *testing.T) {
	for _, tc := range []struct {
		text string
		want int
	}{
		{"", 0}, {"a", 1}, {"abcd", 1}, {"abcde", 2}, {strings.Repeat("x", 400), 100},
	} {
		if got := len(Encode(nil, tc.text)); got != tc.want {
			t.Errorf("Encode(%q) has %d tokens, want %d", tc.text, got, tc.want)
		}
		if got := Count(tc.text); got != tc.want {
			t.Errorf("Count(%q) = %d, want %d", tc.text, got, tc.want)
		}
	}
}

func TestSpecialTokensAreOneTokenWithQwenIDs(t *testing.T) {
	got := Encode(nil, "<|im_start|>user\nhi<|im_end|>\n<|endoftext|>")
	want := []uint32{IMStart, pieceID("user"), pieceID("\nhi"), IMEnd, pieceID("\n"), EndOfText}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("token %d = %d, want %d (all: %v)", i, got[i], want[i], got)
		}
	}
	if Count("<|im_start|>user\nhi<|im_end|>\n<|endoftext|>") != len(want) {
		t.Fatal("Count disagrees with Encode on special tokens")
	}
}

func TestSharedTextPrefixIsSharedTokenPrefix(t *testing.T) {
	prefix := strings.Repeat("shared context ", 40) // 600 bytes
	a := Encode(nil, ApplyChatTemplate([]Message{{Role: "user", Content: prefix + "question one"}}))
	b := Encode(nil, ApplyChatTemplate([]Message{{Role: "user", Content: prefix + "another question"}}))
	shared := 0
	for shared < len(a) && shared < len(b) && a[shared] == b[shared] {
		shared++
	}
	// <|im_start|> + "system\n"+prompt + <|im_end|> + "\n" + <|im_start|>,
	// then whole 4-byte pieces of "user\n"+prefix.
	minShared := 1 + Count("system\n"+DefaultSystemPrompt) + 1 + 1 + 1 + len("user\n"+prefix)/BytesPerToken
	if shared < minShared {
		t.Fatalf("shared %d tokens, want at least %d", shared, minShared)
	}
}

func TestUnmatchedAngleBarIsOrdinaryText(t *testing.T) {
	text := "a <|notspecial|> b"
	if got, want := len(Encode(nil, text)), Count(text); got != want {
		t.Fatalf("Encode gives %d tokens, Count %d", got, want)
	}
	for _, id := range Encode(nil, text) {
		if id >= VocabSize {
			t.Fatalf("ordinary text produced special id %d", id)
		}
	}
}

func TestChatTemplateInsertsDefaultSystemPrompt(t *testing.T) {
	got := ApplyChatTemplate([]Message{{Role: "user", Content: "Hello"}})
	want := "<|im_start|>system\n" + DefaultSystemPrompt + "<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"
	if got != want {
		t.Fatalf("template =\n%q\nwant\n%q", got, want)
	}
	got = ApplyChatTemplate([]Message{{Role: "system", Content: "S"}, {Role: "user", Content: "U"}})
	want = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
	if got != want {
		t.Fatalf("template with system =\n%q\nwant\n%q", got, want)
	}
}

func TestFillerWordsAreOneTokenEach(t *testing.T) {
	for i := range len(fillers) {
		if n := Count(TokenText(i)); n != 1 {
			t.Errorf("filler %q is %d tokens", TokenText(i), n)
		}
		if TokenID(i) != Encode(nil, TokenText(i))[0] {
			t.Errorf("TokenID(%d) disagrees with Encode", i)
		}
	}
}

func BenchmarkEncodeChat(b *testing.B) {
	text := ApplyChatTemplate([]Message{{Role: "user", Content: strings.Repeat("The quick brown fox jumps. ", 20)}})
	buf := make([]uint32, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = Encode(buf[:0], text)
	}
}

func TestGetIDsHandsOutEmptyBuffers(t *testing.T) {
	p := GetIDs()
	*p = append(*p, 1, 2, 3)
	PutIDs(p)
	for range 4 {
		q := GetIDs()
		if len(*q) != 0 {
			t.Fatalf("pooled buffer came back with %v", *q)
		}
		PutIDs(q)
	}
}
