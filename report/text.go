package report

// Text helpers of the report's builder and renderers.

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// splitSources reads expect.yaml's comma-separated source field.
func splitSources(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

var notSlug = regexp.MustCompile(`[^a-z0-9]+`)

// slug is an HTML id fragment: lower case, runs of other characters as "-".
func slug(s string) string {
	return strings.Trim(notSlug.ReplaceAllString(strings.ToLower(s), "-"), "-")
}

func appendUnique(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

func indexFold(list []string, s string) int {
	for i, v := range list {
		if strings.EqualFold(v, s) {
			return i
		}
	}
	return -1
}

// firstLines keeps the first n non-empty lines of s, trimmed.
func firstLines(s string, n int) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimRight(l, " \t\r"); strings.TrimSpace(l) == "" {
			continue
		}
		if len(out) == n {
			if n > 1 {
				out = append(out, "...")
			}
			break
		}
		if n == 1 {
			l = strings.TrimSpace(l)
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

func shortPath(p string) string {
	if i := strings.Index(p, "/suites/"); i >= 0 {
		return p[i+1:]
	}
	return p
}

func labelString(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%q", k, m[k]))
	}
	return "{" + strings.Join(parts, ",") + "}"
}
