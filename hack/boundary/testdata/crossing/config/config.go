// A measure reaching up into the evidence: config/ importing report/.
package config

import "github.com/gpustack/routing-conformance/report"

func Out() string { return report.File }
