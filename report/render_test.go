package report

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const chromiumPath = "/usr/bin/chromium"

// TestHTMLRendersItsChartsInHeadlessChromium opens the report in a real
// browser and looks for the bars' colour in the screenshot, then checks that
// a page without charts fails the same check.
func TestHTMLRendersItsChartsInHeadlessChromium(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skip("chromium is not installed at " + chromiumPath + "; apt-get install -y chromium to run the rendering check")
	}
	if testing.Short() {
		t.Skip("starts a browser; skipped with -short")
	}
	dir, _ := writeAll(t)
	out, err := exec.Command("bash", "check-render.sh", filepath.Join(dir, FileHTML)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "renders with its charts") {
		t.Fatalf("check-render.sh: %v\n%s", err, out)
	}

	bare := filepath.Join(t.TempDir(), "bare.html")
	if err := os.WriteFile(bare, []byte("<!DOCTYPE html><html><body><h1>no charts</h1></body></html>"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command("bash", "check-render.sh", bare).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "did not render") {
		t.Fatalf("a page without charts passed the check: %v\n%s", err, out)
	}
}
