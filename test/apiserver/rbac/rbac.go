// Package rbac applies the suite's least-privilege RBAC (deploy/rbac/, the
// files its kustomization.yaml lists) to a real API server and hands out a
// kubeconfig for its ServiceAccount with a token from the TokenRequest API:
// the identity a run inside the cluster would have, so a suite run with it
// proves the manifests grant everything the suite uses.
package rbac

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/gpustack/routing-conformance/test/apiserver/harness"
)

// The ServiceAccount deploy/rbac/ creates.
const (
	Namespace      = "routing-conformance"
	ServiceAccount = "routing-conformance"
)

// tokenSeconds is the lifetime asked of the ServiceAccount token; a tier
// run is far shorter.
const tokenSeconds = 3600

// Objects reads the objects deploy/rbac/kustomization.yaml lists, in order.
func Objects(dir string) ([]runtime.Object, error) {
	var k struct {
		Resources []string `json:"resources"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("%s/kustomization.yaml: %w", dir, err)
	}
	var out []runtime.Object
	for _, file := range k.Resources {
		objs, err := readFile(filepath.Join(dir, file))
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

func readFile(path string) ([]runtime.Object, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var out []runtime.Object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, obj)
	}
}

// Apply creates objs (from Objects, possibly edited) on the API server.
func Apply(ctx context.Context, cfg *rest.Config, objs []runtime.Object) error {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		var err error
		switch o := obj.(type) {
		case *corev1.Namespace:
			_, err = kube.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
		case *corev1.ServiceAccount:
			_, err = kube.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = kube.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = kube.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = kube.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			err = fmt.Errorf("deploy/rbac holds a %T, which this applier does not know", obj)
		}
		if err != nil {
			return fmt.Errorf("apply %T: %w", obj, err)
		}
	}
	return nil
}

// Kubeconfig writes a kubeconfig for the ServiceAccount to file: the API
// server and CA of admin, and a token from the TokenRequest API.
func Kubeconfig(ctx context.Context, admin *rest.Config, file string) error {
	return ServiceAccountKubeconfig(ctx, admin, Namespace, ServiceAccount, nil, file)
}

// ServiceAccountKubeconfig writes a kubeconfig for ServiceAccount
// namespace/name to file: the API server and CA of admin, and a token from
// the TokenRequest API, bound to bound when set (a kubelet binds a Pod's
// projected token to the Pod).
func ServiceAccountKubeconfig(ctx context.Context, admin *rest.Config, namespace, name string,
	bound *authenticationv1.BoundObjectReference, file string) error {
	kube, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return err
	}
	tr, err := kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](tokenSeconds), BoundObjectRef: bound}},
		metav1.CreateOptions{})
	if err == nil && tr.Status.Token == "" {
		err = errors.New("empty token")
	}
	if err != nil {
		return fmt.Errorf("TokenRequest for %s/%s: %w", namespace, name, err)
	}
	sa := rest.AnonymousClientConfig(admin)
	sa.BearerToken = tr.Status.Token
	return harness.WriteKubeconfig(file, sa)
}
