package kubelet

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Describe renders one Pod the way kubectl describe pod lays it out, for
// artifacts. It returns "" for a Pod that does not exist.
func (k *Kubelet) Describe(namespace, name string) string {
	k.mu.Lock()
	p := k.pods[namespace+"/"+name]
	if p == nil {
		k.mu.Unlock()
		return ""
	}
	st := p.statusLocked()
	specs := make([]ContainerSpec, len(p.containers))
	for i, c := range p.containers {
		specs[i] = c.spec
	}
	events := slices.Clone(p.events)
	k.mu.Unlock()

	var b strings.Builder
	field := func(k, v string) { fmt.Fprintf(&b, "%-14s%s\n", k+":", v) }
	field("Name", st.Name)
	field("Namespace", st.Namespace)
	field("UID", st.UID)
	field("Start Time", st.CreationTimestamp.UTC().Format(time.RFC1123Z))
	field("Labels", pairs(st.Labels, "\n              "))
	field("Annotations", pairs(st.Annotations, "\n              "))
	status := st.Phase
	if st.DeletionTimestamp != nil {
		status = "Terminating (deletionTimestamp " + st.DeletionTimestamp.UTC().Format(time.RFC3339Nano) + ")"
	}
	field("Status", status)
	field("IP", st.IP)
	b.WriteString("Containers:\n")
	for i, cs := range st.Containers {
		spec := specs[i]
		fmt.Fprintf(&b, "  %s:\n", cs.Name)
		fmt.Fprintf(&b, "    Image:          %s\n", spec.Image)
		fmt.Fprintf(&b, "    Command:        %s\n", strings.Join(spec.Command, " "))
		fmt.Fprintf(&b, "    Ports:          %v/TCP\n", spec.Ports)
		switch {
		case cs.Running:
			fmt.Fprintf(&b, "    State:          Running\n      Started:      %s\n",
				cs.RunningSince.UTC().Format(time.RFC3339Nano))
		case cs.Waiting != "":
			fmt.Fprintf(&b, "    State:          Waiting\n      Reason:       %s\n", cs.Waiting)
		case cs.Terminated != nil:
			writeTermination(&b, "State", cs.Terminated)
		}
		if cs.LastTermination != nil {
			writeTermination(&b, "Last State", cs.LastTermination)
		}
		fmt.Fprintf(&b, "    Ready:          %t\n    Restart Count:  %d\n", cs.Ready, cs.RestartCount)
		for _, pr := range []struct {
			name string
			p    *Probe
		}{{"Startup", spec.StartupProbe}, {"Readiness", spec.ReadinessProbe}, {"Liveness", spec.LivenessProbe}} {
			if pr.p != nil {
				fmt.Fprintf(&b, "    %-15s %s\n", pr.name+":", pr.p)
			}
		}
		if len(spec.Env) > 0 {
			fmt.Fprintf(&b, "    Environment:\n      %s\n", pairs(spec.Env, "\n      "))
		}
	}
	fmt.Fprintf(&b, "Conditions:\n  Ready  %t\n", st.Ready)
	b.WriteString("Events:\n  Type     Reason     Time                            Message\n")
	for _, e := range events {
		fmt.Fprintf(&b, "  %-8s %-10s %-31s %s\n", e.Type, e.Reason, e.Time.UTC().Format(time.RFC3339Nano), e.Message)
	}
	return b.String()
}

func writeTermination(b *strings.Builder, label string, t *Termination) {
	fmt.Fprintf(b, "    %-15s Terminated\n      Reason:       %s\n      Exit Code:    %d\n"+
		"      Started:      %s\n      Finished:     %s\n", label+":", t.Reason, t.ExitCode,
		t.StartedAt.UTC().Format(time.RFC3339Nano), t.FinishedAt.UTC().Format(time.RFC3339Nano))
}

func pairs(m map[string]string, sep string) string {
	if len(m) == 0 {
		return "<none>"
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return strings.Join(out, sep)
}
