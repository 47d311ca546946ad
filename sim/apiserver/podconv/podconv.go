// Package podconv carries the sim's Pods across a real API server: the sim
// operator's kubelet.PodSpec becomes a core/v1 Pod (ToPod), the node agent
// turns the stored Pod back into what the sim's kubelet runs (FromPod), the
// kubelet's status becomes the Pod's status (Status), and the stored Pod
// reads back as the kubelet.PodStatus the operator's reconcile loop works on
// (FromStatus).
//
// Times in a Pod spec are seconds; the sim runs them scaled by Second, so the
// sim's 50 ms probe period is written as the operator's periodSeconds 10.
package podconv

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/sim/kubelet"
	"github.com/gpustack/routing-conformance/sim/operator"
	"github.com/gpustack/routing-conformance/sim/programs"
)

// Second is how long one second of a Pod spec (probe periods, the preStop
// sleep) lasts on the sim node: the operator's 10 s probe period is the
// sim's 50 ms.
const Second = 5 * time.Millisecond

// Port names the operator gives the containers' ports.
const (
	PortHTTP    = "http"
	PortMetrics = "metrics"
)

// ToPod is spec as the Pod an operator creates: containers with their
// program as command and the rest as args, env, named ports, probes and the
// drain hook as a preStop sleep. The API server assigns UID and status.
func ToPod(spec kubelet.PodSpec) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: spec.Name, Namespace: spec.Namespace,
		Labels: maps.Clone(spec.Labels), Annotations: maps.Clone(spec.Annotations),
	}}
	for _, c := range spec.Containers {
		ct := corev1.Container{
			Name:    c.Name,
			Image:   c.Image,
			Command: program(c),
			Args:    slices.Clone(c.Args),
		}
		for _, k := range slices.Sorted(maps.Keys(c.Env)) {
			ct.Env = append(ct.Env, corev1.EnvVar{Name: k, Value: c.Env[k]})
		}
		for _, e := range c.EnvFrom {
			ct.Env = append(ct.Env, toEnvVar(e))
		}
		for _, m := range c.Mounts {
			vol := volumeName(m.ConfigMap)
			ct.VolumeMounts = append(ct.VolumeMounts, corev1.VolumeMount{Name: vol, MountPath: m.Path, ReadOnly: true})
			if !slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == vol }) {
				p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{
					ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: m.ConfigMap}}}})
			}
		}
		for i, port := range c.Ports {
			cp := corev1.ContainerPort{ContainerPort: int32(port), Protocol: corev1.ProtocolTCP}
			switch {
			case port == api.RouterMetricsPort && i > 0:
				cp.Name = PortMetrics
			case i == 0:
				cp.Name = PortHTTP
			}
			ct.Ports = append(ct.Ports, cp)
		}
		ct.StartupProbe = toProbe(c.StartupProbe)
		ct.ReadinessProbe = toProbe(c.ReadinessProbe)
		ct.LivenessProbe = toProbe(c.LivenessProbe)
		if spec.PreStopDelay > 0 {
			ct.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
				Sleep: &corev1.SleepAction{Seconds: seconds(spec.PreStopDelay)}}}
		}
		p.Spec.Containers = append(p.Spec.Containers, ct)
	}
	return p
}

// toEnvVar is an env entry resolved at start: a ConfigMap key
// (configMapKeyRef) or a downward-API field (fieldRef).
func toEnvVar(e kubelet.EnvSource) corev1.EnvVar {
	v := corev1.EnvVar{Name: e.Name, ValueFrom: &corev1.EnvVarSource{}}
	if e.ConfigMap != "" {
		v.ValueFrom.ConfigMapKeyRef = &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: e.ConfigMap}, Key: e.Key}
	} else {
		v.ValueFrom.FieldRef = &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: e.FieldPath}
	}
	return v
}

// volumeName is the Pod volume that carries ConfigMap cm.
func volumeName(cm string) string { return "cm-" + cm }

// program is the part of Command that names the program: Command is the
// whole argv and Args what the program parses.
func program(c kubelet.ContainerSpec) []string {
	if n := len(c.Command) - len(c.Args); n >= 0 && slices.Equal(c.Command[n:], c.Args) {
		return slices.Clone(c.Command[:n])
	}
	return slices.Clone(c.Command)
}

func toProbe(p *kubelet.Probe) *corev1.Probe {
	if p == nil {
		return nil
	}
	out := &corev1.Probe{PeriodSeconds: int32(seconds(p.Period)), FailureThreshold: int32(p.FailureThreshold)}
	if p.TCPPort > 0 {
		out.TCPSocket = &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(p.TCPPort))}
	} else {
		out.HTTPGet = &corev1.HTTPGetAction{Path: p.HTTPPath, Port: intstr.FromInt32(int32(p.HTTPPort))}
	}
	return out
}

// seconds writes a sim duration as whole Pod-spec seconds, at least 1.
func seconds(d time.Duration) int64 {
	return max(1, int64((d+Second/2)/Second))
}

// FromPod is what the sim's kubelet runs for a stored Pod: each container's
// program resolved by its command in reg (a program not in the registry
// fails to start, as a missing executable does), a router container given
// the Pods API (routers discover engines through it), and the preStop sleep
// as the drain delay. The kubelet keeps its own grace period.
func FromPod(p *corev1.Pod, reg programs.Registry) kubelet.PodSpec {
	spec := kubelet.PodSpec{
		Name: p.Name, Namespace: p.Namespace, UID: string(p.UID),
		Labels: maps.Clone(p.Labels), Annotations: maps.Clone(p.Annotations),
	}
	_, router := p.Labels[api.LabelRouter]
	for _, c := range p.Spec.Containers {
		prog := c.Command
		if len(prog) == 0 {
			prog = entrypoint(c.Image)
		}
		main := reg.Command(prog)
		if main == nil {
			main = programs.NotFound(append(slices.Clone(prog), c.Args...))
		}
		ct := kubelet.ContainerSpec{
			Name: c.Name, Image: c.Image, Main: main, WatchPods: router,
			Command: append(slices.Clone(c.Command), c.Args...), Args: slices.Clone(c.Args),
			Env:          map[string]string{},
			StartupProbe: fromProbe(c.StartupProbe), ReadinessProbe: fromProbe(c.ReadinessProbe),
			LivenessProbe: fromProbe(c.LivenessProbe),
		}
		for _, e := range c.Env {
			switch {
			case e.ValueFrom == nil:
				ct.Env[e.Name] = e.Value
			case e.ValueFrom.ConfigMapKeyRef != nil:
				ref := e.ValueFrom.ConfigMapKeyRef
				ct.EnvFrom = append(ct.EnvFrom, kubelet.EnvSource{Name: e.Name, ConfigMap: ref.Name, Key: ref.Key})
			case e.ValueFrom.FieldRef != nil:
				ct.EnvFrom = append(ct.EnvFrom, kubelet.EnvSource{Name: e.Name, FieldPath: e.ValueFrom.FieldRef.FieldPath})
			}
		}
		for _, m := range c.VolumeMounts {
			for _, v := range p.Spec.Volumes {
				if v.Name == m.Name && v.ConfigMap != nil {
					ct.Mounts = append(ct.Mounts, kubelet.ConfigMapMount{Path: m.MountPath, ConfigMap: v.ConfigMap.Name})
				}
			}
		}
		for _, port := range c.Ports {
			ct.Ports = append(ct.Ports, int(port.ContainerPort))
		}
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
			spec.PreStopDelay = max(spec.PreStopDelay, time.Duration(c.Lifecycle.PreStop.Sleep.Seconds)*Second)
		}
		spec.Containers = append(spec.Containers, ct)
	}
	return spec
}

// entrypoint is what an image runs for a container without a command: the
// images the operator renders such containers with
// (docs/operator.md#versions-and-images), llm-d's envoy in the router Pod
// and its routing proxy beside a decoder.
func entrypoint(image string) []string {
	switch image {
	case operator.DefaultRouterProxyImage:
		return operator.ProgramEnvoy
	case operator.DefaultRoutingSidecarImage:
		return operator.ProgramRoutingProxy
	}
	return nil
}

func fromProbe(p *corev1.Probe) *kubelet.Probe {
	if p == nil {
		return nil
	}
	out := &kubelet.Probe{Period: time.Duration(p.PeriodSeconds) * Second, FailureThreshold: int(p.FailureThreshold)}
	switch {
	case p.TCPSocket != nil:
		out.TCPPort = p.TCPSocket.Port.IntValue()
	case p.HTTPGet != nil:
		out.HTTPPath, out.HTTPPort = p.HTTPGet.Path, p.HTTPGet.Port.IntValue()
	}
	return out
}

// Status is the Pod status a kubelet reports for st: phase, the Pod and
// host IPs, the four conditions and each container's state, last
// termination and restart count. p is the stored Pod: a condition keeps
// its transition time while its value holds.
func Status(p *corev1.Pod, st kubelet.PodStatus, hostIP string) corev1.PodStatus {
	out := corev1.PodStatus{
		Phase:   corev1.PodPhase(st.Phase),
		HostIP:  hostIP,
		HostIPs: []corev1.HostIP{{IP: hostIP}},
	}
	if st.IP != "" {
		out.PodIP, out.PodIPs = st.IP, []corev1.PodIP{{IP: st.IP}}
	}
	start := metav1.NewTime(st.CreationTimestamp.Truncate(time.Second))
	out.StartTime = &start
	images := map[string]string{}
	for _, c := range p.Spec.Containers {
		images[c.Name] = c.Image
	}
	allReady := len(st.Containers) > 0
	for _, c := range st.Containers {
		cs := corev1.ContainerStatus{
			Name: c.Name, Image: images[c.Name], ImageID: "sim://" + images[c.Name],
			ContainerID: fmt.Sprintf("sim://%s/%s/%d", st.UID, c.Name, c.RestartCount),
			Ready:       c.Ready, Started: &c.Started, RestartCount: c.RestartCount,
		}
		switch {
		case c.Running:
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.RunningSince)}
		case c.Terminated != nil:
			cs.State.Terminated = terminated(c.Terminated)
		default:
			reason := c.Waiting
			if reason == "" {
				reason = kubelet.ReasonContainerCreate
			}
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason}
			if reason == kubelet.ReasonCrashLoopBackOff {
				cs.State.Waiting.Message = fmt.Sprintf("back-off restarting failed container %s in pod %s_%s(%s)",
					c.Name, st.Name, st.Namespace, st.UID)
			}
		}
		if c.LastTermination != nil {
			cs.LastTerminationState.Terminated = terminated(c.LastTermination)
		}
		if !c.Ready {
			allReady = false
		}
		out.ContainerStatuses = append(out.ContainerStatuses, cs)
	}
	conds := []corev1.PodCondition{
		{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
		{Type: corev1.ContainersReady, Status: boolCondition(allReady)},
		{Type: corev1.PodReady, Status: boolCondition(st.Ready)},
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	for i := range conds {
		conds[i].LastTransitionTime = now
		for _, old := range p.Status.Conditions {
			if old.Type == conds[i].Type && old.Status == conds[i].Status {
				conds[i].LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	out.Conditions = conds
	return out
}

func terminated(t *kubelet.Termination) *corev1.ContainerStateTerminated {
	return &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Reason: t.Reason,
		StartedAt: metav1.NewTime(t.StartedAt), FinishedAt: metav1.NewTime(t.FinishedAt)}
}

func boolCondition(b bool) corev1.ConditionStatus {
	if b {
		return corev1.ConditionTrue
	}
	return corev1.ConditionFalse
}

// FromStatus reads a stored Pod as the sim's kubelet would describe it,
// for the operator's reconcile loop.
func FromStatus(p *corev1.Pod) kubelet.PodStatus {
	st := kubelet.PodStatus{
		Name: p.Name, Namespace: p.Namespace, UID: string(p.UID), IP: p.Status.PodIP,
		Labels: maps.Clone(p.Labels), Annotations: maps.Clone(p.Annotations),
		Phase: string(p.Status.Phase), CreationTimestamp: p.CreationTimestamp.Time,
	}
	if st.Phase == "" {
		st.Phase = kubelet.PhasePending
	}
	if p.DeletionTimestamp != nil {
		t := p.DeletionTimestamp.Time
		st.DeletionTimestamp = &t
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			st.Ready = c.Status == corev1.ConditionTrue && p.Status.Phase == corev1.PodRunning
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		c := kubelet.ContainerStatus{Name: cs.Name, Ready: cs.Ready, RestartCount: cs.RestartCount,
			Started: cs.Started != nil && *cs.Started}
		switch {
		case cs.State.Running != nil:
			c.Running, c.RunningSince = true, cs.State.Running.StartedAt.Time
		case cs.State.Terminated != nil:
			c.Terminated = fromTerminated(cs.State.Terminated)
		case cs.State.Waiting != nil:
			c.Waiting = cs.State.Waiting.Reason
		}
		if t := cs.LastTerminationState.Terminated; t != nil {
			c.LastTermination = fromTerminated(t)
		}
		st.Containers = append(st.Containers, c)
	}
	return st
}

func fromTerminated(t *corev1.ContainerStateTerminated) *kubelet.Termination {
	return &kubelet.Termination{ExitCode: t.ExitCode, Reason: t.Reason, StartedAt: t.StartedAt.Time,
		FinishedAt: t.FinishedAt.Time}
}

// Key is a Pod's namespace/name.
func Key(namespace, name string) string { return namespace + "/" + name }

// SplitKey is Key's inverse.
func SplitKey(key string) (namespace, name string) {
	namespace, name, _ = strings.Cut(key, "/")
	return namespace, name
}

// ObjectRef is the events' involvedObject for a Pod.
func ObjectRef(p *corev1.Pod) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: p.Namespace, Name: p.Name,
		UID: p.UID, ResourceVersion: p.ResourceVersion}
}
