// Package proc is the contract between the sim's kubelet and the programs it
// runs as containers: the router emulators (vllm-router, sgl-model-gateway)
// and the engine emulators (vllm serve, python3 -m sglang.launch_server).
//
// A program is a Main function that gets the argv the operator rendered, the
// Pod's environment, writers for stdout and stderr, and a way to listen on the
// Pod's own loopback address. It returns its exit code; cancelling ctx is
// SIGTERM. This keeps each emulator shaped like the real binary: it parses its
// real flags, prints its real output, exits 2 on a clap error.
package proc

import (
	"context"
	"io"
	"io/fs"
	"net"
)

// Main is a simulated program's entry point. It returns the exit code.
type Main func(ctx context.Context, c *Container) int

// Container is what a simulated program sees of its Pod.
type Container struct {
	// Args is argv without the program name (what the operator renders).
	Args []string
	// Env is the container environment (spec.roles[].env and the sim's knobs).
	Env map[string]string
	// Stdout and Stderr are the container's log streams; the kubelet keeps them
	// as kubectl logs would show them (interleaved, current and previous).
	Stdout io.Writer
	Stderr io.Writer
	// Pod is the Pod this container runs in.
	Pod PodInfo
	// Listen binds a TCP address as the container would: a host of 0.0.0.0,
	// "" or the Pod IP binds the Pod's own loopback IP; the port is kept.
	Listen func(addr string) (net.Listener, error)
	// Pods is the Kubernetes API as seen by a program that watches Pods
	// (service discovery in the routers). Nil for engines.
	Pods PodWatcher
	// Faults are the HTTP faults injected into this Pod (nil: none ever).
	// Every HTTP server a program runs wraps its handler with
	// Faults.Handler(port, h).
	Faults *Faults
	// Killed is closed when the kubelet kills the container outright: a
	// zero-grace delete, or a graceful stop that outlived its grace period.
	// A Main that runs an operating-system process SIGKILLs it then, since
	// the kubelet stops waiting for Main; nil never closes.
	Killed <-chan struct{}
	// Files are the container's mounted volumes, paths without the leading
	// "/" (/config/epp.yaml is "config/epp.yaml"); nil without mounts.
	Files fs.FS
}

// PodInfo identifies the Pod a container runs in.
type PodInfo struct {
	Name        string
	Namespace   string
	UID         string
	IP          string
	Labels      map[string]string
	Annotations map[string]string
}

// Pod is a Pod as a watcher sees it.
type Pod struct {
	PodInfo
	// Phase is Pending, Running, Succeeded or Failed.
	Phase string
	// Ready is the Pod's Ready condition.
	Ready bool
	// Deleting is true once the Pod has a deletionTimestamp.
	Deleting bool
}

// PodWatcher lists and watches Pods in a namespace ("" = all namespaces).
type PodWatcher interface {
	// List returns the Pods matching every label equality in selector.
	List(namespace string, selector map[string]string) []Pod
	// Watch returns a channel that receives a value after every Pod change,
	// and a cancel function. The channel is buffered (1): a missed tick only
	// means a change is coalesced with the next, so callers re-List on receipt.
	Watch() (<-chan struct{}, func())
}
