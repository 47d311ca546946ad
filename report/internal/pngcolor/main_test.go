package main

import (
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

func TestCountFindsOnlyTheColour(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 10, 10))
	for y := 0; y < 10; y++ {
		for x := 0; x < 10; x++ {
			img.Set(x, y, color.White)
		}
	}
	for x := 0; x < 7; x++ {
		img.Set(x, 0, color.RGBA{0x1f, 0x77, 0xb4, 0xff})
	}
	img.Set(0, 1, color.RGBA{0x20, 0x78, 0xb5, 0xff}) // within tolerance 2
	img.Set(0, 2, color.RGBA{0x2f, 0x77, 0xb4, 0xff}) // not
	path := filepath.Join(t.TempDir(), "x.png")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := png.Encode(f, img); err != nil {
		t.Fatal(err)
	}
	f.Close()
	n, total, err := count(path, "#1f77b4", 2)
	if err != nil || n != 8 || total != 100 {
		t.Errorf("count = %d of %d, %v; want 8 of 100", n, total, err)
	}
	if _, _, err := count(path, "blue", 2); err == nil {
		t.Error("a colour that is not #rrggbb was accepted")
	}
}
