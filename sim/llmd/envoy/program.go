package envoy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gpustack/routing-conformance/sim/llmd/extproc"
	"github.com/gpustack/routing-conformance/sim/proc"
)

// Deps is what the program needs from the sim.
type Deps struct {
	// Files is the container's file system (the mounted ConfigMap).
	Files func(c *proc.Container) fs.FS
}

// Main returns the envoy program: argv "-c <bootstrap>" as the operator
// renders it. It exits 1 when the bootstrap cannot be read or parsed
// ("error initializing configuration"), 0 after shutdown. Envoy's own
// startup and admin logging is not emulated; stdout carries the access log.
func Main(deps Deps) proc.Main {
	return func(ctx context.Context, c *proc.Container) int {
		path, err := configPath(c.Args)
		if err != nil {
			fmt.Fprintln(c.Stderr, err)
			return 1
		}
		var fsys fs.FS = emptyFS{}
		if deps.Files != nil {
			if f := deps.Files(c); f != nil {
				fsys = f
			}
		}
		data, err := fs.ReadFile(fsys, strings.TrimPrefix(path, "/"))
		var cfg *Config
		if err == nil {
			cfg, err = ParseConfig(data)
		}
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				err = fmt.Errorf("Invalid path: %s", path) //nolint:staticcheck // Envoy's text
			}
			fmt.Fprintf(c.Stderr, "error initializing configuration '%s': %v\n", path, err)
			return 1
		}
		// 127.0.0.1 inside the Pod is the Pod's own address in the sim.
		extAddr := cfg.ExtProcAddr
		if host, port, err := net.SplitHostPort(extAddr); err == nil && (host == "127.0.0.1" || host == "localhost") {
			extAddr = net.JoinHostPort(c.Pod.IP, port)
		}
		ln, err := c.Listen(":" + strconv.Itoa(cfg.ListenPort))
		if err != nil {
			fmt.Fprintf(c.Stderr, "error initializing configuration '%s': cannot bind '0.0.0.0:%d': %v\n", path, cfg.ListenPort, err)
			return 1
		}
		var ext *extproc.Client
		if cfg.ProcessingMode != nil {
			ext, err = extproc.NewClient(extAddr, cfg.ExtProcAuthority, cfg.ExtProcConnectTimeout)
			if err != nil {
				ln.Close()
				fmt.Fprintf(c.Stderr, "error initializing configuration '%s': ext_proc: %v\n", path, err)
				return 1
			}
			defer ext.Close()
		}
		p := NewProxy(cfg, ext, c.Stdout)
		srv := &http.Server{Handler: c.Faults.Handler(cfg.ListenPort, p), ReadHeaderTimeout: time.Minute}
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = srv.Serve(ln)
		}()
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = srv.Shutdown(shutdown)
		cancel()
		_ = srv.Close()
		<-done
		p.Close()
		return 0
	}
}

// configPath reads -c / --config-path.
func configPath(args []string) (string, error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		for _, f := range []string{"-c", "--config-path"} {
			if a == f && i+1 < len(args) {
				return args[i+1], nil
			}
			if v, ok := strings.CutPrefix(a, f+"="); ok {
				return v, nil
			}
		}
	}
	return "", errors.New("At least one of --config-path or --config-yaml or Options::configProto() should be non-empty") //nolint:staticcheck // Envoy's text
}

type emptyFS struct{}

func (emptyFS) Open(name string) (fs.File, error) {
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}
