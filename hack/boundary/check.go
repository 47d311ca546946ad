package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Violation is one import that crosses a boundary, at the file that makes it.
type Violation struct {
	Pos      string // file:line
	Pkg, Imp string // module-relative
	Rule     Rule
}

func (v Violation) String() string {
	return fmt.Sprintf("%s: %s imports %s: breaks %q; %s", v.Pos, v.Pkg, v.Imp, v.Rule.Name, v.Rule.Fix)
}

// listed is the part of `go list -json` the check reads.
type listed struct {
	Dir, ImportPath                              string
	GoFiles, CgoFiles, TestGoFiles, XTestGoFiles []string
	IgnoredGoFiles                               []string
}

// Check lists the packages of the module in dir with the go command and
// returns every import, of any file (tests and other platforms' files
// included), that breaks a rule.
func Check(goCmd, dir string, rules []Rule) ([]Violation, error) {
	cmd := exec.Command(goCmd, "list", "-json", "./...")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list in %s: %v: %s", dir, err, strings.TrimSpace(stderr.String()))
	}
	var vs []Violation
	n := 0
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list in %s: %w", dir, err)
		}
		pkg, ok := relative(p.ImportPath)
		if !ok {
			continue
		}
		n++
		files := append(append(append(append(p.GoFiles, p.CgoFiles...), p.TestGoFiles...), p.XTestGoFiles...), p.IgnoredGoFiles...)
		for _, f := range files {
			fv, err := checkFile(filepath.Join(p.Dir, f), pkg, rules)
			if err != nil {
				return nil, err
			}
			vs = append(vs, fv...)
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("go list in %s found no package of %s: run the check from the module's root", dir, Module)
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i].Pos < vs[j].Pos })
	return vs, nil
}

func checkFile(path, pkg string, rules []Rule) ([]Violation, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
	if err != nil {
		return nil, err
	}
	var vs []Violation
	for _, spec := range f.Imports {
		imp, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			return nil, err
		}
		rel, ok := relative(imp)
		if !ok {
			continue
		}
		// One import, one finding: the first rule it breaks (the named
		// rules come before the general layer rule).
		for _, r := range rules {
			if r.From(pkg) && r.To(rel) {
				pos := fset.Position(spec.Pos())
				vs = append(vs, Violation{Pos: fmt.Sprintf("%s:%d", pos.Filename, pos.Line), Pkg: pkg, Imp: rel, Rule: r})
				break
			}
		}
	}
	return vs, nil
}

// relative is path within the module ("" for its root package), or false
// for a package of another module.
func relative(path string) (string, bool) {
	if path == Module {
		return "", true
	}
	rest, ok := strings.CutPrefix(path, Module+"/")
	return rest, ok
}
