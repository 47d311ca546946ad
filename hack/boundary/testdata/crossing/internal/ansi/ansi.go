// A shared helper that knows a project fact: below every layer, it may import none.
package ansi

import "github.com/gpustack/routing-conformance/api"

func Strip(s string) string { return s + api.Kind }
