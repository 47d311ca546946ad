package tier

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpustack/routing-conformance/clusters/kube"
	"github.com/gpustack/routing-conformance/sim/apiserver/webhook"
	"github.com/gpustack/routing-conformance/test/apiserver/harness"
	"github.com/gpustack/routing-conformance/test/apiserver/install"
	"github.com/gpustack/routing-conformance/test/apiserver/rbac"
	"github.com/gpustack/routing-conformance/test/apiserver/stack"
	"github.com/gpustack/routing-conformance/test/apiserver/suitecompare"
)

// preflightBound is how long a preflight may take to give its one line when
// something is wrong; it never waits for a fix.
const preflightBound = 30 * time.Second

// deploy/rbac/ applied for real, with each permission the suite uses taken
// away in turn: the ServiceAccount's preflight names exactly the missing
// one, in one line. (create selfsubjectaccessreviews is not among them: the
// API server's default system:basic-user ClusterRole grants it to every
// authenticated user, so removing it from deploy/rbac changes nothing here.)
func TestPreflightNamesEachMissingVerb(t *testing.T) {
	c := harness.Start(t, harness.Options{})
	ctx := t.Context()
	if _, err := install.All(ctx, c.Config); err != nil {
		t.Fatal(err)
	}
	wh, err := webhook.Serve()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wh.Close() })
	if err := webhook.Register(ctx, c.Config, wh, "default"); err != nil {
		t.Fatal(err)
	}
	admin := kubernetes.NewForConfigOrDie(c.Config)
	if _, err := admin.CoreV1().Namespaces().Create(ctx, namespace(stack.OperatorNamespace), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	repo, err := suitecompare.Repo(".")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := rbac.Objects(filepath.Join(repo, "deploy", "rbac"))
	if err != nil {
		t.Fatal(err)
	}
	if err := rbac.Apply(ctx, c.Config, objs); err != nil {
		t.Fatal(err)
	}
	saConfig := filepath.Join(t.TempDir(), "sa.kubeconfig")
	if err := rbac.Kubeconfig(ctx, c.Config, saConfig); err != nil {
		t.Fatal(err)
	}
	sa, err := kube.New(kube.Options{Kubeconfig: saConfig, PreflightNamespace: "default",
		OperatorNamespace: stack.OperatorNamespace, Intervals: fastIntervals, Logf: func(string, ...any) {}})
	if err != nil {
		t.Fatal(err)
	}
	if err := eventually(ctx, func() error { return sa.Preflight(ctx) }, func(err error) bool { return err == nil }); err != nil {
		t.Fatalf("preflight as the ServiceAccount with deploy/rbac complete: %v", err)
	}
	saRest, err := clientcmd.BuildConfigFromFlags("", saConfig)
	if err != nil {
		t.Fatal(err)
	}
	saKube := kubernetes.NewForConfigOrDie(saRest)

	var roles []*rbacv1.ClusterRole
	var nsRoles []*rbacv1.Role
	for _, o := range objs {
		switch r := o.(type) {
		case *rbacv1.ClusterRole:
			roles = append(roles, r)
		case *rbacv1.Role:
			nsRoles = append(nsRoles, r)
		}
	}
	// check takes verb away from the first rule match accepts, writes the
	// role, expects the preflight line to contain want, and restores it.
	check := func(t *testing.T, a kube.Access, what string, want []string, rules *[]rbacv1.PolicyRule, write func([]rbacv1.PolicyRule) error,
		match func(rbacv1.PolicyRule) bool, verb string) {
		t.Helper()
		orig := slices.Clone(*rules)
		edited, found := withoutVerb(orig, match, verb)
		if !found {
			t.Fatalf("deploy/rbac grants no %s", what)
		}
		if err := write(edited); err != nil {
			t.Fatal(err)
		}
		// The authorizer sees the edit a moment after it is stored; one
		// review tells when, then one preflight must name it.
		if err := eventually(ctx, func() error { return allowed(ctx, saKube, a) }, func(err error) bool { return err != nil }); err == nil {
			t.Fatalf("%s is still allowed without the rule", what)
		}
		start := time.Now()
		got := sa.Preflight(ctx)
		if err := write(orig); err != nil {
			t.Fatal(err)
		}
		t.Logf("without %s (named after %s): %v", what, time.Since(start).Round(time.Millisecond), got)
		if got == nil || strings.Contains(got.Error(), "\n") || time.Since(start) > preflightBound {
			t.Fatalf("preflight without %s: %v after %s, want one line within %s", what, got, time.Since(start), preflightBound)
		}
		for _, w := range want {
			if !strings.Contains(got.Error(), w) {
				t.Errorf("preflight without %s: %q does not contain %q", what, got, w)
			}
		}
		// Exactly one permission is named: "missing RBAC: <one>; apply ...".
		if list, _, _ := strings.Cut(strings.TrimPrefix(got.Error(), "preflight: missing RBAC: "), ";"); strings.Contains(list, ", ") {
			t.Errorf("preflight without %s names more than it: %q", what, list)
		}
		restored := time.Now()
		if err := eventually(ctx, func() error { return allowed(ctx, saKube, a) }, func(err error) bool { return err == nil }); err != nil {
			t.Fatalf("after %s was granted again: %v", what, err)
		}
		t.Logf("granted again after %s", time.Since(restored).Round(time.Millisecond))
	}
	clusterRoleWriter := func(r *rbacv1.ClusterRole) func([]rbacv1.PolicyRule) error {
		return func(rules []rbacv1.PolicyRule) error {
			cur, err := admin.RbacV1().ClusterRoles().Get(ctx, r.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Rules = rules
			_, err = admin.RbacV1().ClusterRoles().Update(ctx, cur, metav1.UpdateOptions{})
			return err
		}
	}
	roleWriter := func(r *rbacv1.Role) func([]rbacv1.PolicyRule) error {
		return func(rules []rbacv1.PolicyRule) error {
			cur, err := admin.RbacV1().Roles(r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Rules = rules
			_, err = admin.RbacV1().Roles(r.Namespace).Update(ctx, cur, metav1.UpdateOptions{})
			return err
		}
	}

	for _, a := range kube.RequiredAccess {
		t.Run(a.String(), func(t *testing.T) {
			match := func(r rbacv1.PolicyRule) bool {
				res := a.Resource
				if a.Subresource != "" {
					res += "/" + a.Subresource
				}
				return slices.Contains(r.APIGroups, a.Group) && slices.Contains(r.Resources, res)
			}
			want := []string{"missing RBAC: " + a.String(), "deploy/rbac"}
			if a.OperatorNS {
				for _, r := range nsRoles {
					if slices.ContainsFunc(r.Rules, match) {
						check(t, a, a.String(), want, &r.Rules, roleWriter(r), match, a.Verb)
						return
					}
				}
			} else {
				for _, r := range roles {
					if slices.ContainsFunc(r.Rules, match) {
						check(t, a, a.String(), want, &r.Rules, clusterRoleWriter(r), match, a.Verb)
						return
					}
				}
			}
			t.Fatalf("deploy/rbac has no rule for %s", a)
		})
	}
}

// allowed is nil when the client may do a (a SelfSubjectAccessReview).
func allowed(ctx context.Context, kc kubernetes.Interface, a kube.Access) error {
	ns := ""
	if a.OperatorNS {
		ns = stack.OperatorNamespace
	}
	got, err := kc.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: a.Verb, Group: a.Group, Resource: a.Resource, Subresource: a.Subresource}}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	if !got.Status.Allowed {
		return fmt.Errorf("%s not allowed", a)
	}
	return nil
}

// withoutVerb is rules with verb taken from the first rule match accepts;
// a resource that rule lists beside the matched one keeps the verb in a rule
// of its own, so exactly one permission goes.
func withoutVerb(rules []rbacv1.PolicyRule, match func(rbacv1.PolicyRule) bool, verb string) ([]rbacv1.PolicyRule, bool) {
	out := make([]rbacv1.PolicyRule, 0, len(rules)+1)
	found := false
	for _, r := range rules {
		if found || !match(r) || !slices.Contains(r.Verbs, verb) {
			out = append(out, *r.DeepCopy())
			continue
		}
		found = true
		rest := *r.DeepCopy()
		rest.Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == verb })
		if len(rest.Verbs) > 0 {
			out = append(out, rest)
		}
		// The other resources of the rule keep verb: split them off one at
		// a time and keep those match does not accept.
		for _, res := range r.Resources {
			one := *r.DeepCopy()
			one.Resources, one.Verbs = []string{res}, []string{verb}
			if !match(one) {
				out = append(out, one)
			}
		}
	}
	return out, found
}

// The API server stops under a running deployment and comes back: while it
// is down the preflight and a readiness wait give their reason within their
// bounds, and afterwards the same deployment is Ready again and serves
// through the same port-forward address (the kube target reopens its
// tunnel), then is deleted with its namespace.
func TestAPIServerRestartMidRun(t *testing.T) {
	s := stack.Start(t, stack.Options{Harness: harness.Options{Restartable: true}})
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	k, d := deployReady(ctx, t, s, routedMD("restarted", "--policy", "round_robin"))
	base, err := d.OpenAIBaseURL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if code, err := chat(ctx, base); err != nil || code != http.StatusOK {
		t.Fatalf("chat before the restart: %d %v", code, err)
	}

	if err := s.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = k.Preflight(ctx)
	t.Logf("preflight while the API server is down (%s): %v", time.Since(start).Round(time.Millisecond), err)
	if err == nil || !strings.Contains(err.Error(), "cannot reach the Kubernetes API server") || strings.Contains(err.Error(), "\n") {
		t.Errorf("preflight while the API server is down: %v, want one line saying it cannot reach it", err)
	}
	if time.Since(start) > preflightBound {
		t.Errorf("preflight took %s to report the API server down", time.Since(start))
	}
	const readyBound = 3 * time.Second
	short, cancelShort := context.WithTimeout(ctx, readyBound)
	start = time.Now()
	err = d.WaitReady(short, 100*time.Millisecond)
	cancelShort()
	t.Logf("WaitReady while the API server is down (%s): %v", time.Since(start).Round(time.Millisecond), err)
	if err == nil {
		t.Error("WaitReady succeeded while the API server was down")
	} else if !strings.Contains(err.Error(), d.Namespace()) || !strings.Contains(err.Error(), "restarted") {
		t.Errorf("WaitReady's error does not name the deployment: %v", err)
	}
	if waited := time.Since(start); waited > readyBound+5*time.Second {
		t.Errorf("WaitReady returned %s after its deadline", waited-readyBound)
	}

	if err := s.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	if err := d.WaitReady(ctx, 100*time.Millisecond); err != nil {
		t.Fatalf("WaitReady after the restart: %v", err)
	}
	for i := range 4 {
		if code, err := chat(ctx, base); err != nil || code != http.StatusOK {
			t.Fatalf("chat %d through %s after the restart: %d %v", i, base, code, err)
		}
	}
	if snap, err := d.RouterMetrics(ctx); err != nil || len(snap.Names()) == 0 {
		t.Errorf("router metrics through the Pod proxy after the restart: %v", err)
	}
	ns := d.Namespace()
	if err := d.Delete(ctx); err != nil {
		t.Fatalf("delete after the restart: %v", err)
	}
	if _, err := s.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
		t.Errorf("namespace %s still exists after Delete", ns)
	}
}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}
