package kubelet

import (
	"fmt"
	"io/fs"
	"maps"
	"strings"
	"testing/fstest"
)

// ReasonCreateContainerConfigError is the waiting reason of a container
// whose env or volumes reference a ConfigMap or key that does not exist.
const ReasonCreateContainerConfigError = "CreateContainerConfigError"

// EnvSource is an env entry resolved when the container starts: a key of a
// ConfigMap in the Pod's namespace (configMapKeyRef, not optional), or a
// downward-API field (fieldRef: metadata.name, metadata.namespace,
// metadata.uid, status.podIP).
type EnvSource struct {
	Name      string
	ConfigMap string
	Key       string
	FieldPath string
}

// ConfigMapMount is a ConfigMap volume: every key a file under Path.
type ConfigMapMount struct {
	Path      string
	ConfigMap string
}

// prepared is what a container instance starts with.
type prepared struct {
	env   map[string]string
	args  []string
	files fs.FS
}

// prepare resolves a container's env sources and ConfigMap volumes and
// expands $(VAR) in its args, as the kubelet does before it starts a
// container. A missing ConfigMap or key is the error the kubelet reports as
// CreateContainerConfigError.
func (k *Kubelet) prepare(p *pod, c *container) (prepared, error) {
	env := maps.Clone(c.spec.Env)
	if env == nil {
		env = map[string]string{}
	}
	for _, e := range c.spec.EnvFrom {
		switch {
		case e.ConfigMap != "":
			data, err := k.configMap(p.spec.Namespace, e.ConfigMap)
			if err != nil {
				return prepared{}, err
			}
			v, ok := data[e.Key]
			if !ok {
				return prepared{}, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", e.Key, p.spec.Namespace, e.ConfigMap)
			}
			env[e.Name] = v
		case e.FieldPath != "":
			v, err := p.field(e.FieldPath)
			if err != nil {
				return prepared{}, err
			}
			env[e.Name] = v
		}
	}
	out := prepared{env: env, args: make([]string, len(c.spec.Args))}
	for i, a := range c.spec.Args {
		out.args[i] = ExpandVars(a, env)
	}
	if len(c.spec.Mounts) > 0 {
		files := fstest.MapFS{}
		for _, m := range c.spec.Mounts {
			data, err := k.configMap(p.spec.Namespace, m.ConfigMap)
			if err != nil {
				return prepared{}, err
			}
			dir := strings.Trim(m.Path, "/")
			for key, v := range data {
				files[dir+"/"+key] = &fstest.MapFile{Data: []byte(v), Mode: 0o644}
			}
		}
		out.files = files
	}
	return out, nil
}

func (k *Kubelet) configMap(namespace, name string) (map[string]string, error) {
	if k.opts.ConfigMaps != nil {
		if data, ok := k.opts.ConfigMaps(namespace, name); ok {
			return data, nil
		}
	}
	return nil, fmt.Errorf("configmap %q not found", name)
}

// field is a downward-API value of the Pod.
func (p *pod) field(path string) (string, error) {
	switch path {
	case "metadata.name":
		return p.spec.Name, nil
	case "metadata.namespace":
		return p.spec.Namespace, nil
	case "metadata.uid":
		return p.uid, nil
	case "status.podIP":
		return p.ip, nil
	}
	return "", fmt.Errorf("unsupported fieldPath %q (the sim's kubelet resolves metadata.name, metadata.namespace, metadata.uid and status.podIP)", path)
}

// ExpandVars expands $(VAR) references in s from env as the kubelet expands
// a container's command and args: a defined name is replaced by its value,
// an undefined one is left as written, "$$" is a literal "$", and a "$" not
// starting either form is kept (k8s.io/kubernetes
// third_party/forked/golang/expansion, Expand and MappingFuncFor).
func ExpandVars(s string, env map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch next := s[i+1]; next {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString("$(")
				i++
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := env[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
			b.WriteByte(next)
			i++
		}
	}
	return b.String()
}
