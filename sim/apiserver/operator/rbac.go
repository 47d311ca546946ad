package operator

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/sim/operator"
)

// RouterRBACRules are the rules of the Role <md>-router the operator
// renders for every router Pod's ServiceAccount: read Pods in the
// namespace, nothing else
// (gpustack/gpustack-operator@36d990eb:pkg/worker/controllers/worker/model_deployment_router.go,
// renderModelDeploymentRouterObjects).
var RouterRBACRules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}}

// ensureRouterRBAC creates the router's ServiceAccount, Role and
// RoleBinding, each <md>-router with the router labels and owned by the
// ModelDeployment, as the operator renders them beside the Deployment
// (whose Pods run as that ServiceAccount). Existing ones are kept.
func (s *store) ensureRouterRBAC(md *api.ModelDeployment, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	meta := metav1.ObjectMeta{Name: name, Namespace: s.namespace, Labels: operator.RouterLabels(md),
		OwnerReferences: []metav1.OwnerReference{s.owner}}
	_, saErr := s.o.kube.CoreV1().ServiceAccounts(s.namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta}, metav1.CreateOptions{})
	_, roleErr := s.o.kube.RbacV1().Roles(s.namespace).Create(ctx, &rbacv1.Role{ObjectMeta: meta, Rules: RouterRBACRules}, metav1.CreateOptions{})
	_, bindErr := s.o.kube.RbacV1().RoleBindings(s.namespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta,
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: s.namespace}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}}, metav1.CreateOptions{})
	var errs []error
	for kind, err := range map[string]error{"ServiceAccount": saErr, "Role": roleErr, "RoleBinding": bindErr} {
		if err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("router %s %s: %w", kind, name, err))
		}
	}
	return errors.Join(errs...)
}

// deleteRouterRBAC prunes what ensureRouterRBAC created (removing
// spec.router prunes every router object).
func (s *store) deleteRouterRBAC(ctx context.Context, name string) error {
	var errs []error
	for _, err := range []error{
		s.o.kube.CoreV1().ServiceAccounts(s.namespace).Delete(ctx, name, metav1.DeleteOptions{}),
		s.o.kube.RbacV1().Roles(s.namespace).Delete(ctx, name, metav1.DeleteOptions{}),
		s.o.kube.RbacV1().RoleBindings(s.namespace).Delete(ctx, name, metav1.DeleteOptions{}),
	} {
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
