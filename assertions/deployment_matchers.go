package assertions

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/onsi/gomega/types"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
)

// DeploymentState is what says whether a ModelDeployment is Ready: its
// phase, its RouterReady condition and its router Pods.
type DeploymentState struct {
	Name              string
	Phase             string
	RouterReady       string // the condition's status; "" when not reported
	RouterReadyReason string
	RouterPods        []clusters.RouterPod
}

func (s DeploymentState) String() string {
	rows := [][]string{}
	for _, p := range s.RouterPods {
		exit := "-"
		if p.LastExitCode != nil {
			exit = fmt.Sprint(*p.LastExitCode)
		}
		rows = append(rows, []string{p.Name, fmt.Sprint(p.Ready), fmt.Sprint(p.Restarts), exit, p.Waiting})
	}
	return fmt.Sprintf("  %s: phase %q, RouterReady %q (%s)\n%s", s.Name, s.Phase, s.RouterReady, s.RouterReadyReason,
		table([]string{"router Pod", "ready", "restarts", "last exit", "waiting"}, rows))
}

// NotBeReady succeeds when the deployment is out of phase Ready, its
// RouterReady is not True and none of its router Pods is Ready: a router
// that cannot start keeps it so. The evidence is the state read.
func NotBeReady() types.GomegaMatcher {
	return &evidenceMatcher{check: func(actual any) (bool, string, string, error) {
		s, ok := actual.(DeploymentState)
		if !ok {
			return false, "", "", wrongType("NotBeReady", "an assertions.DeploymentState", actual)
		}
		var ready []string
		if s.Phase == api.PhaseReady {
			ready = append(ready, "phase is Ready")
		}
		if s.RouterReady == "True" {
			ready = append(ready, "RouterReady is True")
		}
		for _, p := range s.RouterPods {
			if p.Ready {
				ready = append(ready, "router Pod "+p.Name+" is Ready")
			}
		}
		return len(ready) == 0,
			fmt.Sprintf("Expected the deployment not to be Ready, but %s:\n%s", strings.Join(ready, ", "), s),
			fmt.Sprintf("Expected the deployment to be Ready, but it is not:\n%s", s),
			nil
	}}
}

// HaveExitedWith succeeds when the router Pod's last container exited
// with code. The evidence is the Pod's state.
func HaveExitedWith(code int) types.GomegaMatcher {
	return &evidenceMatcher{check: func(actual any) (bool, string, string, error) {
		p, ok := actual.(clusters.RouterPod)
		if !ok {
			return false, "", "", wrongType("HaveExitedWith", "a clusters.RouterPod", actual)
		}
		got := "no exit yet"
		if p.LastExitCode != nil {
			got = fmt.Sprintf("exit code %d", *p.LastExitCode)
		}
		ev := fmt.Sprintf("  router Pod %s: %s, %d restarts, ready %v, waiting %q", p.Name, got, p.Restarts, p.Ready, p.Waiting)
		return p.LastExitCode != nil && int(*p.LastExitCode) == code,
			fmt.Sprintf("Expected the router to have exited with code %d, but:\n%s", code, ev),
			fmt.Sprintf("Expected the router not to have exited with code %d, but:\n%s", code, ev),
			nil
	}}
}

// HavePodsReplaced succeeds when the actual Pods (name: UID) are those of
// before except replaced: every other Pod keeps its name and UID, each
// replaced one is gone, and as many Pods with new names took their place.
// With nothing replaced: the same Pods, none restarted under a new UID.
// The evidence is every Pod before and after.
func HavePodsReplaced(before map[string]string, replaced ...string) types.GomegaMatcher {
	return &evidenceMatcher{check: func(actual any) (bool, string, string, error) {
		after, ok := actual.(map[string]string)
		if !ok {
			return false, "", "", wrongType("HavePodsReplaced", "a map of Pod name to UID", actual)
		}
		var diffs []string
		var fresh []string
		for name := range after {
			if _, had := before[name]; !had {
				fresh = append(fresh, name)
			}
		}
		names := slices.Sorted(maps.Keys(before))
		for _, name := range slices.Sorted(maps.Keys(after)) {
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
		var rows [][]string
		for _, name := range names {
			b, a := before[name], after[name]
			why := ""
			switch {
			case slices.Contains(replaced, name) && a != "":
				why = "should be gone"
			case slices.Contains(replaced, name):
			case b == "":
				if len(fresh) > len(replaced) {
					why = "new"
				}
			case a == "":
				why = "gone"
			case a != b:
				why = "replaced (new UID)"
			}
			if why != "" {
				diffs = append(diffs, name+" "+why)
			}
			rows = append(rows, []string{name, orDash(b), orDash(a), mark(why == "", why)})
		}
		if len(fresh) != len(replaced) {
			diffs = append(diffs, fmt.Sprintf("%d new Pods for %d replaced", len(fresh), len(replaced)))
		}
		ev := table([]string{"Pod", "UID before", "UID after", ""}, rows)
		want := "to be the same Pods"
		if len(replaced) > 0 {
			want = fmt.Sprintf("to be the same Pods but %s, replaced under new names", strings.Join(replaced, ", "))
		}
		return len(diffs) == 0,
			fmt.Sprintf("Expected the Pods %s, but %s:\n%s", want, strings.Join(diffs, "; "), ev),
			fmt.Sprintf("Expected the Pods not %s, but they are:\n%s", want, ev),
			nil
	}}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
