// Command pngcolor counts the pixels of one colour in a PNG and fails when
// there are fewer than -min. check-render.sh uses it to prove that the
// report's bar charts were drawn in a headless browser screenshot.
//
//	go run ./report/internal/pngcolor -color '#1f77b4' -min 200 shot.png
package main

import (
	"flag"
	"fmt"
	"image/png"
	"os"
	"strconv"
	"strings"
)

func main() {
	colour := flag.String("color", "#1f77b4", "colour to count, #rrggbb")
	minimum := flag.Int("min", 200, "fail with fewer pixels than this")
	tolerance := flag.Int("tolerance", 2, "per-channel difference still counted as the colour")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: pngcolor [-color #rrggbb] [-min N] [-tolerance N] file.png")
		os.Exit(2)
	}
	n, total, err := count(flag.Arg(0), *colour, *tolerance)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pngcolor:", err)
		os.Exit(2)
	}
	fmt.Printf("%s: %d of %d pixels are %s\n", flag.Arg(0), n, total, *colour)
	if n < *minimum {
		fmt.Fprintf(os.Stderr, "pngcolor: fewer than %d pixels of %s: the charts did not render\n", *minimum, *colour)
		os.Exit(1)
	}
}

func count(path, colour string, tolerance int) (n, total int, err error) {
	want, err := parseHex(colour)
	if err != nil {
		return 0, 0, err
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", path, err)
	}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			got := [3]int{int(r >> 8), int(g >> 8), int(bl >> 8)}
			if near(got, want, tolerance) {
				n++
			}
			total++
		}
	}
	return n, total, nil
}

func near(a, b [3]int, tol int) bool {
	for i := range a {
		if d := a[i] - b[i]; d > tol || d < -tol {
			return false
		}
	}
	return true
}

func parseHex(s string) ([3]int, error) {
	s = strings.TrimPrefix(s, "#")
	v, err := strconv.ParseUint(s, 16, 32)
	if err != nil || len(s) != 6 {
		return [3]int{}, fmt.Errorf("colour %q is not #rrggbb", s)
	}
	return [3]int{int(v >> 16 & 0xff), int(v >> 8 & 0xff), int(v & 0xff)}, nil
}
