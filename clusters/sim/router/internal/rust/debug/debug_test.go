package debug

import "testing"

func TestFloatDebugKeepsPointZeroAndShortestDigits(t *testing.T) {
	cases := []struct {
		f    float64
		bits int
		want string
	}{
		{float64(float32(0.3)), 32, "0.3"},
		{1, 32, "1.0"},
		{float64(float32(1.5)), 32, "1.5"},
		{1.25, 64, "1.25"},
		{0, 32, "0.0"},
		{67108864, 32, "67108864.0"},
		{1e16, 64, "1e16"},
		{0.00001, 64, "1e-5"},
		{0.0001, 64, "0.0001"},
		{float64(float32(0.99)), 32, "0.99"},
	}
	for _, c := range cases {
		if got := Float(c.f, c.bits); got != c.want {
			t.Errorf("Float(%v,%d)=%q want %q", c.f, c.bits, got, c.want)
		}
	}
}

func TestStrAndVecDebug(t *testing.T) {
	if got := StrVec([]string{"http://a:1", `q"x`}); got != `["http://a:1", "q\"x"]` {
		t.Fatal(got)
	}
	if got := StrVec(nil); got != "[]" {
		t.Fatal(got)
	}
	if Option("5", true) != "Some(5)" || Option("", false) != "None" {
		t.Fatal("option")
	}
}
