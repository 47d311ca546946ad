package main

import (
	"image"
	"image/color"
	"testing"
)

func white(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.White)
		}
	}
	return img
}

func TestCountFindsOnlyTheColour(t *testing.T) {
	img := white(10, 10)
	for x := range 7 {
		img.Set(x, 0, color.RGBA{0x1f, 0x77, 0xb4, 0xff})
	}
	img.Set(0, 1, color.RGBA{0x20, 0x78, 0xb5, 0xff}) // within tolerance 2
	img.Set(0, 2, color.RGBA{0x2f, 0x77, 0xb4, 0xff}) // not
	n, total, err := countIn(img, "#1f77b4", 2, "")
	if err != nil || n != 8 || total != 100 {
		t.Errorf("count = %d of %d, %v; want 8 of 100", n, total, err)
	}
	if _, _, err := countIn(img, "blue", 2, ""); err == nil {
		t.Error("a colour that is not #rrggbb was accepted")
	}
}

func TestCountWithinABoxIgnoresTheRestOfThePage(t *testing.T) {
	img := white(20, 20)
	// A 10x4 box of #e3eef8 at (2,2) holding 3 black pixels; 5 black pixels outside it.
	for y := 2; y < 6; y++ {
		for x := 2; x < 12; x++ {
			img.Set(x, y, color.RGBA{0xe3, 0xee, 0xf8, 0xff})
		}
	}
	for _, p := range []image.Point{{3, 3}, {4, 3}, {10, 4}} {
		img.Set(p.X, p.Y, color.Black)
	}
	for x := range 5 {
		img.Set(x, 15, color.Black)
	}
	n, total, err := countIn(img, "#000000", 40, "#e3eef8")
	if err != nil || n != 3 || total != 40 {
		t.Errorf("count within = %d of %d, %v; want 3 of 40", n, total, err)
	}
	if _, _, err := countIn(img, "#000000", 40, "#123456"); err == nil {
		t.Error("a box colour that is nowhere on the page was accepted")
	}
}

func TestContentHeightIsTheLastRowThatIsNotBackground(t *testing.T) {
	img := white(10, 100)
	img.Set(9, 41, color.Black)
	if h := contentHeight(img); h != 42 {
		t.Errorf("content height %d, want 42", h)
	}
	if h := contentHeight(white(10, 10)); h != 0 {
		t.Errorf("blank page height %d, want 0", h)
	}
}
