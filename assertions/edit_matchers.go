package assertions

import (
	"fmt"
	"slices"
	"strings"

	"github.com/onsi/gomega/types"

	"github.com/gpustack/routing-conformance/clusters"
)

// HaveRefusedRollout succeeds while an edit to router args the router
// refuses is a failed rollout, as the router Deployment's RollingUpdate
// (surge 1, unavailable 0) keeps it (docs/operator.md#router-rollout-and-the-router-service):
// the new router Pod exists and is not Ready, the Pods that served before
// the edit are still there and Ready, and RouterReady stays True, as the
// operator reports it while the Deployment has a ready replica. The
// evidence is the state read.
func HaveRefusedRollout(newPod string, serving []string) types.GomegaMatcher {
	return &evidenceMatcher{check: func(actual any) (bool, string, string, error) {
		s, ok := actual.(DeploymentState)
		if !ok {
			return false, "", "", wrongType("HaveRefusedRollout", "an assertions.DeploymentState", actual)
		}
		var wrong []string
		i := slices.IndexFunc(s.RouterPods, func(p clusters.RouterPod) bool { return p.UID == newPod })
		switch {
		case i < 0:
			wrong = append(wrong, "the new router Pod (UID "+newPod+") is gone")
		case s.RouterPods[i].Ready:
			wrong = append(wrong, "the new router Pod "+s.RouterPods[i].Name+" is Ready")
		}
		for _, uid := range serving {
			j := slices.IndexFunc(s.RouterPods, func(p clusters.RouterPod) bool { return p.UID == uid })
			switch {
			case j < 0:
				wrong = append(wrong, "the router Pod that served before the edit (UID "+uid+") is gone")
			case !s.RouterPods[j].Ready:
				wrong = append(wrong, "the router Pod that served before the edit, "+s.RouterPods[j].Name+", is not Ready")
			}
		}
		if s.RouterReady != "True" {
			wrong = append(wrong, fmt.Sprintf("RouterReady is %q (%s), not True", s.RouterReady, s.RouterReadyReason))
		}
		return len(wrong) == 0,
			fmt.Sprintf("Expected a failed rollout (the new router Pod never Ready, the previous one serving), but %s:\n%s", strings.Join(wrong, ", "), s),
			fmt.Sprintf("Expected no failed rollout, but the new router Pod is not Ready while the previous one serves:\n%s", s),
			nil
	}}
}

// EditGuard is what the framework's guard over its own edits of
// spec.router.extraArgs saw in a run: whether an edit replaced an engine
// Pod, and its line.
type EditGuard struct {
	Tripped bool
	Line    string
}

// HaveKeptEngines succeeds when no edit of spec.router.extraArgs replaced
// an engine Pod. The evidence is the guard's line.
func HaveKeptEngines() types.GomegaMatcher {
	return &evidenceMatcher{check: func(actual any) (bool, string, string, error) {
		g, ok := actual.(EditGuard)
		if !ok {
			return false, "", "", wrongType("HaveKeptEngines", "an assertions.EditGuard", actual)
		}
		return !g.Tripped,
			"Expected every edit of spec.router.extraArgs to keep the engine Pods, but one did not:\n  " + g.Line,
			"Expected an edit of spec.router.extraArgs to replace an engine Pod, but every one kept them",
			nil
	}}
}
