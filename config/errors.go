package config

import (
	"fmt"
	"strings"
)

// Error lists every problem found in a config, one per line, each naming
// where the value came from (the file, with its line, or an environment
// variable), the field path and what is accepted.
type Error struct {
	Problems []string
}

func (e *Error) Error() string { return strings.Join(e.Problems, "\n") }

type problems struct{ list []string }

// add records a problem with field path, attributed to the env var that set
// it or to the file (with the line the decoder saw it on).
func (p *problems) add(c *Config, path, msg string) {
	src, line := c.source(path)
	s := fmt.Sprintf("%s: %s %s", src, path, msg)
	if line > 0 {
		s += fmt.Sprintf(" (line %d)", line)
	}
	p.list = append(p.list, s)
}

func (p *problems) err(_ *Config) error {
	if len(p.list) == 0 {
		return nil
	}
	return &Error{Problems: p.list}
}

// source finds who set path: the longest prefix set from the environment
// wins, else the file and the line of the path (or its nearest parent).
func (c *Config) source(path string) (string, int) {
	for q := path; q != ""; q = parent(q) {
		if env, ok := c.fromEnv[q]; ok {
			return env, 0
		}
	}
	for q := path; q != ""; q = parent(q) {
		if line, ok := c.lines[q]; ok {
			return c.name(), line
		}
	}
	return c.name(), 0
}

// Origin says where the field at path got its value: the environment
// variable that set it, else the file (with the line of the path or its
// nearest parent).
func (c *Config) Origin(path string) string {
	src, line := c.source(path)
	if line > 0 {
		return fmt.Sprintf("%s line %d", src, line)
	}
	return src
}

// parent drops the last element of a path: a.b[2].c -> a.b[2] -> a.b -> a.
func parent(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}
