package kube

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// rbacDir is deploy/rbac, relative to this package.
var rbacDir = filepath.Join("..", "..", "deploy", "rbac")

func loadRBAC(t *testing.T) (cluster, operatorNS []rbacv1.PolicyRule, docs map[string]int) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(rbacDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", rbacDir, err)
	}
	docs = map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(b), "\n---\n") {
			var head struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Namespace string `json:"namespace"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			docs[head.Kind]++
			switch head.Kind {
			case "ClusterRole":
				var r rbacv1.ClusterRole
				if err := yaml.UnmarshalStrict([]byte(doc), &r); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				cluster = append(cluster, r.Rules...)
			case "Role":
				var r rbacv1.Role
				if err := yaml.UnmarshalStrict([]byte(doc), &r); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				if r.Namespace != DefaultOperatorNamespace {
					t.Errorf("%s: Role in %q, want %s", f, r.Namespace, DefaultOperatorNamespace)
				}
				operatorNS = append(operatorNS, r.Rules...)
			}
		}
	}
	return cluster, operatorNS, docs
}

func grants(rules []rbacv1.PolicyRule, a Access) bool {
	res := a.Resource
	if a.Subresource != "" {
		res += "/" + a.Subresource
	}
	for _, r := range rules {
		if has(r.APIGroups, a.Group) && has(r.Resources, res) && has(r.Verbs, a.Verb) {
			return true
		}
	}
	return false
}

func has(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Every permission the preflight checks is granted by deploy/rbac, and
// deploy/rbac grants nothing else beyond the few extras listed with a reason.
func TestRBACManifestsGrantExactlyWhatTheSuiteChecks(t *testing.T) {
	cluster, opNS, docs := loadRBAC(t)
	for _, kind := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Job"} {
		if docs[kind] == 0 {
			t.Errorf("deploy/rbac has no %s", kind)
		}
	}
	for _, a := range RequiredAccess {
		rules := cluster
		if a.OperatorNS {
			rules = opNS
		}
		if !grants(rules, a) {
			t.Errorf("deploy/rbac does not grant %s", a)
		}
	}
	extras := map[string]string{
		"get pods/portforward":                                 "WebSocket port-forward upgrades are GETs",
		"create selfsubjectaccessreviews.authorization.k8s.io": "the preflight's own access reviews",
		"get deployments.apps (operator namespace)":            "read one named Deployment",
	}
	check := func(rules []rbacv1.PolicyRule, operatorNS bool) {
		for _, r := range rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						if v == "*" || res == "*" || g == "*" {
							t.Errorf("wildcard in %v", r)
						}
						base, sub, _ := strings.Cut(res, "/")
						a := Access{Group: g, Resource: base, Subresource: sub, Verb: v, OperatorNS: operatorNS}
						if !requiredHas(a) && extras[a.String()] == "" {
							t.Errorf("deploy/rbac grants %s, which the suite does not use", a)
						}
					}
				}
			}
		}
	}
	check(cluster, false)
	check(opNS, true)
}

func requiredHas(a Access) bool {
	for _, r := range RequiredAccess {
		if r == a {
			return true
		}
	}
	return false
}
