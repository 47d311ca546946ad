package report

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const chromiumPath = "/usr/bin/chromium"

func needChromium(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skip("chromium is not installed at " + chromiumPath + "; apt-get install -y chromium to run the rendering check")
	}
	if testing.Short() {
		t.Skip("starts a browser; skipped with -short")
	}
}

func checkRender(t *testing.T, html string, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", "check-render.sh", html)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestHTMLRendersItsHeadlineMatrixAndChartsInHeadlessChromium opens the
// report in a real browser and checks the screenshots' pixels: text in the
// headline's box, each result colour inside the matrix's frame, the bars'
// colour. Then it checks that pages missing each of them fail.
func TestHTMLRendersItsHeadlineMatrixAndChartsInHeadlessChromium(t *testing.T) {
	needChromium(t)
	dir, _ := writeAll(t)
	page := filepath.Join(dir, FileHTML)
	shot := filepath.Join(t.TempDir(), "top.png")
	out, err := checkRender(t, page, "SCREENSHOT="+shot)
	if err != nil || !strings.Contains(out, "renders with its headline, matrix and charts") {
		t.Fatalf("check-render.sh: %v\n%s", err, out)
	}
	for _, want := range []string{"inside the #e3eef8 box are #000000", "inside the #56b4e9 box are #009e73",
		"inside the #56b4e9 box are #d55e00", "inside the #56b4e9 box are #f0e442", "inside the #56b4e9 box are #dddddd", "are #0072b2", "content height"} {
		if !strings.Contains(out, want) {
			t.Errorf("check-render.sh did not check %q:\n%s", want, out)
		}
	}
	if fi, err := os.Stat(shot); err != nil || fi.Size() == 0 {
		t.Errorf("SCREENSHOT was not kept: %v", err)
	}

	html := read(t, page)
	broken := map[string]string{
		"a page without a report":   "<!DOCTYPE html><html><body><h1>no charts</h1></body></html>",
		"a headline with no text":   regexp.MustCompile(`(?s)<h1>.*?</h1>\s*<p>.*?</p>`).ReplaceAllString(html, ""),
		"matrix cells not coloured": strings.Replace(html, ".pass { background", ".pass { xbackground", 1),
		"charts that did not draw":  strings.ReplaceAll(html, `fill="`+BarFill+`"`, `fill="#ffffff"`),
	}
	for name, doc := range broken {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "broken.html")
			if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := checkRender(t, path)
			if err == nil || !strings.Contains(out, "did not render") {
				t.Errorf("passed the check: %v\n%s", err, out)
			}
		})
	}
}

// TestCheckRenderColoursMatchTheReport keeps the script's colours in step
// with the page's.
func TestCheckRenderColoursMatchTheReport(t *testing.T) {
	script := read(t, "check-render.sh")
	for name, c := range map[string]string{"bar_fill": BarFill, "headline_bg": ColourHeadline, "matrix_frame": ColourMatrixFrame,
		"[pass]": ColourPass, "[fail]": ColourFail, "[skip]": ColourSkip, "[na]": ColourNotApplicable} {
		if !strings.Contains(script, name+`="`+c+`"`) {
			t.Errorf("check-render.sh does not set %s=%q", name, c)
		}
	}
}
