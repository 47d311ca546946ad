// Command boundary checks the project's import boundaries (rules.go) over
// the suite's module and the API-server tier's, and names every import
// that crosses one with its file and line. make lint runs it:
//
//	go run ./hack/boundary [module dir ...]
//
// With no arguments it checks the module in the working directory and
// test/apiserver below it.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	dirs := os.Args[1:]
	if len(dirs) == 0 {
		dirs = []string{".", filepath.Join("test", "apiserver")}
	}
	bad := 0
	for _, d := range dirs {
		vs, err := Check("go", d, Rules)
		if err != nil {
			fmt.Fprintln(os.Stderr, "boundary:", err)
			os.Exit(2)
		}
		for _, v := range vs {
			fmt.Fprintln(os.Stderr, "boundary:", v)
		}
		bad += len(vs)
	}
	if bad > 0 {
		fmt.Fprintf(os.Stderr, "boundary: %d imports cross the project's boundaries (docs/architecture.md#boundaries)\n", bad)
		os.Exit(1)
	}
	var names []string
	for _, r := range named {
		names = append(names, r.Name)
	}
	fmt.Printf("boundary: kept: %s; and each of the %d layers imports only the layers below it\n", strings.Join(names, "; "), len(Layers))
}
