package overhead

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// startTimeout bounds the wait for the server process to listen.
const startTimeout = 10 * time.Second

// Process is a paced server running in a process of its own.
type Process struct {
	// URL is the server's root, e.g. http://127.0.0.1:41234.
	URL    string
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	dir    string
	exited chan error
}

// StartProcess runs name with args plus "-addr 127.0.0.1:0 -addr-file F",
// a command that calls Serve with them (bench/cmd/pacedserver, or cmd/e2e's
// overhead-server), and waits until it listens.
func StartProcess(ctx context.Context, name string, args ...string) (*Process, error) {
	dir, err := os.MkdirTemp("", "overhead-server-")
	if err != nil {
		return nil, err
	}
	addrFile := filepath.Join(dir, "addr")
	p := &Process{dir: dir, stderr: &bytes.Buffer{}, exited: make(chan error, 1)}
	p.cmd = exec.Command(name, append(args, "-addr", "127.0.0.1:0", "-addr-file", addrFile)...)
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("overhead: starting the server %s: %w", name, err)
	}
	exited := p.exited
	go func() { exited <- p.cmd.Wait() }()
	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(addrFile); err == nil && len(b) > 0 {
			p.URL = "http://" + string(b)
			return p, nil
		}
		select {
		case err := <-exited:
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("overhead: the server %s exited before listening (%v): %s", name, err, bytes.TrimSpace(p.stderr.Bytes()))
		case <-deadline.C:
			_ = p.cmd.Process.Kill()
			<-exited
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("overhead: the server %s did not listen within %s: %s", name, startTimeout, bytes.TrimSpace(p.stderr.Bytes()))
		case <-ctx.Done():
			_ = p.cmd.Process.Kill()
			<-exited
			_ = os.RemoveAll(dir)
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// Stop ends the server (SIGTERM, then SIGKILL after 5 s), waits for it and
// removes its files.
func (p *Process) Stop() error {
	defer os.RemoveAll(p.dir)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(5 * time.Second):
	}
	err := p.cmd.Process.Kill()
	<-p.exited
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return fmt.Errorf("overhead: the server did not stop within 5s of SIGTERM and was killed: %s", bytes.TrimSpace(p.stderr.Bytes()))
}
