// Command pngcolor checks a headless-browser screenshot of the report: it
// counts the pixels of one colour and fails when there are fewer than -min,
// optionally only inside the box that another colour spans (the text inside
// the headline's background, say), or prints how tall the page's content is.
// check-render.sh uses it to prove that the headline, the matrix cells and
// the bar charts were drawn.
//
//	go run ./report/internal/pngcolor -color '#0072b2' -min 200 shot.png
//	go run ./report/internal/pngcolor -color '#000000' -tolerance 60 -within '#e3eef8' -min 300 shot.png
//	go run ./report/internal/pngcolor -height shot.png
package main

import (
	"errors"
	"flag"
	"fmt"
	"image"
	"image/png"
	"os"
	"strconv"
	"strings"
)

func main() {
	colour := flag.String("color", "#0072b2", "colour to count, #rrggbb")
	minimum := flag.Int("min", 200, "fail with fewer pixels than this")
	tolerance := flag.Int("tolerance", 2, "per-channel difference still counted as the colour")
	within := flag.String("within", "", "count only inside the bounding box of this colour's pixels, #rrggbb")
	what := flag.String("what", "", "what the pixels are, for the failure message (default: the colour)")
	height := flag.Bool("height", false, "print the height in pixels of the content (the last row that is not the background) and exit")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: pngcolor [-color #rrggbb] [-min N] [-tolerance N] [-within #rrggbb] [-what text] [-height] file.png")
		os.Exit(2)
	}
	img, err := load(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "pngcolor:", err)
		os.Exit(2)
	}
	if *height {
		fmt.Printf("%s: content height %d px (screenshot %d px)\n", flag.Arg(0), contentHeight(img), img.Bounds().Dy())
		return
	}
	n, total, err := countIn(img, *colour, *tolerance, *within)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pngcolor:", err)
		os.Exit(1)
	}
	where := ""
	if *within != "" {
		where = " inside the " + *within + " box"
	}
	fmt.Printf("%s: %d of %d pixels%s are %s\n", flag.Arg(0), n, total, where, *colour)
	if n < *minimum {
		name := *what
		if name == "" {
			name = *colour
		}
		fmt.Fprintf(os.Stderr, "pngcolor: fewer than %d pixels of %s%s: %s did not render\n", *minimum, *colour, where, name)
		os.Exit(1)
	}
}

func load(path string) (image.Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return img, nil
}

func rgb(img image.Image, x, y int) [3]int {
	r, g, b, _ := img.At(x, y).RGBA()
	return [3]int{int(r >> 8), int(g >> 8), int(b >> 8)}
}

// countIn counts the pixels near colour in img, or, with within, in the
// bounding box of within's exact pixels.
func countIn(img image.Image, colour string, tolerance int, within string) (n, total int, err error) {
	want, err := parseHex(colour)
	if err != nil {
		return 0, 0, err
	}
	box := img.Bounds()
	if within != "" {
		bg, err := parseHex(within)
		if err != nil {
			return 0, 0, err
		}
		var ok bool
		if box, ok = boundingBox(img, bg); !ok {
			return 0, 0, fmt.Errorf("no pixel is %s: the box to look inside did not render", within)
		}
	}
	for y := box.Min.Y; y < box.Max.Y; y++ {
		for x := box.Min.X; x < box.Max.X; x++ {
			if near(rgb(img, x, y), want, tolerance) {
				n++
			}
			total++
		}
	}
	return n, total, nil
}

// boundingBox is the smallest rectangle holding every pixel of colour c.
func boundingBox(img image.Image, c [3]int) (image.Rectangle, bool) {
	b := img.Bounds()
	box := image.Rectangle{Min: b.Max, Max: b.Min}
	found := false
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if rgb(img, x, y) == c {
				found = true
				box.Min.X, box.Min.Y = min(box.Min.X, x), min(box.Min.Y, y)
				box.Max.X, box.Max.Y = max(box.Max.X, x+1), max(box.Max.Y, y+1)
			}
		}
	}
	return box, found
}

// contentHeight is one past the last row holding a pixel that differs from
// the bottom-left one (the page background below the content).
func contentHeight(img image.Image) int {
	b := img.Bounds()
	bg := rgb(img, b.Min.X, b.Max.Y-1)
	for y := b.Max.Y - 1; y >= b.Min.Y; y-- {
		for x := b.Min.X; x < b.Max.X; x++ {
			if rgb(img, x, y) != bg {
				return y + 1 - b.Min.Y
			}
		}
	}
	return 0
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
	h := strings.TrimPrefix(s, "#")
	v, err := strconv.ParseUint(h, 16, 32)
	if err != nil || len(h) != 6 {
		return [3]int{}, errors.New("colour " + strconv.Quote(s) + " is not #rrggbb")
	}
	return [3]int{int(v >> 16 & 0xff), int(v >> 8 & 0xff), int(v & 0xff)}, nil
}
