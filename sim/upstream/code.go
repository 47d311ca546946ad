package upstream

import (
	"github.com/gpustack/routing-conformance/clusters"
)

// Code is which code runs as router's container from this install.
func (in *Install) Code(router string) clusters.RouterCode {
	b, _ := in.Binary(router)
	return clusters.RouterCode{Implementation: clusters.RouterBuilt, Binary: b.Build.Binary, Package: b.Build.Package,
		Version: b.Build.Version, File: b.Build.Sdist, SHA256: b.Build.SdistSHA256, HashChecked: b.Build.HashPinned,
		Patches: b.Build.Patches}
}
