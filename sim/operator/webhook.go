package operator

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpustack/routing-conformance/api"
)

var roleNameRE = regexp.MustCompile(RoleNamePattern)

// validateObject holds the webhook rules answerable from the object alone
// (validateModelDeployment), in the webhook's order.
func validateObject(md *api.ModelDeployment, existingRoles map[string]bool) field.ErrorList {
	errs := validateRoles(md)
	errs = append(errs, validateEngineVersion(md)...)
	errs = append(errs, validateKVCache(md)...)
	errs = append(errs, validateRolesCount(md)...)
	errs = append(errs, validateRoleServiceNames(md, existingRoles)...)
	errs = append(errs, validateServiceNamesAreDistinct(md)...)
	errs = append(errs, validateRoleMemberNames(md)...)
	errs = append(errs, validateRoleKinds(md)...)
	errs = append(errs, validateRouter(md)...)
	return errs
}

// validateRoles refuses role extraArgs the operator owns for the engine.
func validateRoles(md *api.ModelDeployment) field.ErrorList {
	var errs field.ErrorList
	for i := range md.Spec.Roles {
		role := &md.Spec.Roles[i]
		rp := field.NewPath("spec", "roles").Index(i)
		for j, arg := range role.ExtraArgs {
			name := ArgName(arg)
			if !slices.Contains(EngineOwnedArgs[md.Spec.Engine.Name], name) {
				continue
			}
			errs = append(errs, field.Invalid(rp.Child("extraArgs").Index(j), arg, fmt.Sprintf(
				"%q is set by the operator for engine %q and must not be supplied here, because two "+
					"values for it cannot be told apart; replace the whole command line through "+
					"%s to own it instead", name, md.Spec.Engine.Name, rp.Child("command"))))
		}
	}
	return errs
}

func validateEngineVersion(md *api.ModelDeployment) field.ErrorList {
	if md.Spec.Engine.Version != "" {
		return nil
	}
	for i := range md.Spec.Roles {
		role := &md.Spec.Roles[i]
		if role.Image != "" {
			continue
		}
		return field.ErrorList{field.Required(field.NewPath("spec", "engine", "version"), fmt.Sprintf(
			"role %q names no image of its own, so its image is synthesized from the engine and its "+
				"version, and an empty version assembles a tag naming something never typed. Give the "+
				"engine a version, or name an image on the role", role.Name))}
	}
	return nil
}

func validateKVCache(md *api.ModelDeployment) field.ErrorList {
	kc := md.Spec.KVCache
	if kc == nil || (kc.PoolRef != nil && kc.PoolRef.Name != "") {
		return nil
	}
	return field.ErrorList{field.Required(field.NewPath("spec", "kvCache", "poolRef", "name"),
		"the Binding name must not be empty: the Binding is the authorization point for reaching "+
			"the pool, and an empty reference names none")}
}

func validateRolesCount(md *api.ModelDeployment) field.ErrorList {
	if len(md.Spec.Roles) <= MaxRoles {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("spec", "roles"), len(md.Spec.Roles), fmt.Sprintf(
		"at most %d roles: every role renders its own replicas, Services and queue references, and a "+
			"deployment naming more than that is a shape this operator does not serve — a "+
			"prefill/decode deployment names two", MaxRoles))}
}

func validateRoleServiceNames(md *api.ModelDeployment, existing map[string]bool) field.ErrorList {
	var errs field.ErrorList
	for i := range md.Spec.Roles {
		role := md.Spec.Roles[i].Name
		if existing[role] {
			continue
		}
		name := md.Metadata.Name + "-" + role
		why := isDNS1035Label(name)
		if len(why) == 0 {
			continue
		}
		errs = append(errs, field.Invalid(field.NewPath("spec", "roles").Index(i).Child("name"), role,
			fmt.Sprintf("this role is fronted by a Service named %q (%d characters), which is not a valid "+
				"Service name: %s. Shorten or rename this role, or the deployment",
				name, len(name), strings.Join(why, "; "))))
	}
	return errs
}

func validateServiceNamesAreDistinct(md *api.ModelDeployment) field.ErrorList {
	var errs field.ErrorList
	claimedBy := map[string]string{md.Metadata.Name: "the deployment's own Service"}
	if md.Spec.Router != nil {
		claimedBy[RouterServiceName(md)] = "the Service fronting the managed router"
	}
	for i := range md.Spec.Roles {
		role := &md.Spec.Roles[i]
		derived := []string{md.Metadata.Name + "-" + role.Name}
		describes := []string{fmt.Sprintf("the Service fronting role %q", role.Name)}
		if roleSize(role) > 1 {
			for ordinal := range int(role.RoleReplicas()) {
				derived = append(derived, fmt.Sprintf("%s-%s-r%d", md.Metadata.Name, role.Name, ordinal))
				describes = append(describes, fmt.Sprintf(
					"the headless Service publishing instance %d of role %q", ordinal, role.Name))
			}
		}
		for j, name := range derived {
			if by, taken := claimedBy[name]; taken {
				errs = append(errs, field.Invalid(field.NewPath("spec", "roles").Index(i).Child("name"),
					role.Name, fmt.Sprintf("%s would be named %q, and so would %s. One name is one object, "+
						"and the two need different shapes, so whichever is written last leaves the other "+
						"without the addresses it publishes. Rename this role", describes[j], name, by)))
				continue
			}
			claimedBy[name] = describes[j]
		}
	}
	return errs
}

func validateRoleMemberNames(md *api.ModelDeployment) field.ErrorList {
	var errs field.ErrorList
	for i := range md.Spec.Roles {
		role := &md.Spec.Roles[i]
		if roleSize(role) <= 1 {
			continue
		}
		name := fmt.Sprintf("%s-%s-r%d-m%d", md.Metadata.Name, role.Name,
			max(int(role.RoleReplicas())-1, 0), int(roleSize(role))-1)
		why := isDNS1123Label(name)
		if len(why) == 0 {
			continue
		}
		errs = append(errs, field.Invalid(field.NewPath("spec", "roles").Index(i), name, fmt.Sprintf(
			"a replica of this role is addressed by naming each of its Pods, and the longest such name "+
				"would be %q (%d characters), which cannot be a hostname: %s. Shorten the role or the "+
				"deployment, or declare fewer replicas", name, len(name), strings.Join(why, "; "))))
	}
	return errs
}

func validateRoleKinds(md *api.ModelDeployment) field.ErrorList {
	var errs field.ErrorList
	hasServer, hasOther := false, false
	for i := range md.Spec.Roles {
		if md.Spec.Roles[i].RoleKind() == api.RoleKindServer {
			hasServer = true
		} else {
			hasOther = true
		}
	}
	firstOfKind := map[string]int{}
	for i := range md.Spec.Roles {
		role := &md.Spec.Roles[i]
		kindPath := field.NewPath("spec", "roles").Index(i).Child("kind")
		kind := role.RoleKind()
		if hasServer && hasOther {
			errs = append(errs, field.Invalid(kindPath, kind, fmt.Sprintf(
				"%q cannot be combined with another kind in one deployment: a %q role serves whole "+
					"requests by itself, so a deployment holding one beside a %q or %q role describes no "+
					"arrangement the engines' KV transfer configuration can express",
				api.RoleKindServer, api.RoleKindServer, api.RoleKindPrefill, api.RoleKindDecode)))
			continue
		}
		if kind == api.RoleKindServer {
			continue
		}
		if first, seen := firstOfKind[kind]; seen {
			errs = append(errs, field.Invalid(kindPath, kind, fmt.Sprintf(
				"kind %q is already declared by role %q: only %q may be declared by more than one role, "+
					"because a set of servers is a set of equals, whereas nothing consuming these roles "+
					"expresses a second %q and the extra role would render into a configuration nothing "+
					"downstream can reach", kind, md.Spec.Roles[first].Name, api.RoleKindServer, kind)))
			continue
		}
		firstOfKind[kind] = i
	}
	return errs
}

// validateRouter is the webhook's validateModelDeploymentRouter.
func validateRouter(md *api.ModelDeployment) field.ErrorList {
	r := md.Spec.Router
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	argsPath := field.NewPath("spec", "router", "extraArgs")
	for i, arg := range r.ExtraArgs {
		name := ArgName(arg)
		if !slices.Contains(RouterOwnedArgs[r.Name], name) {
			continue
		}
		errs = append(errs, field.Invalid(argsPath.Index(i), arg, RouterRefusal(name, r.Name)))
	}
	if r.DisaggregationThresholdTokens != nil && r.Name != api.RouterLLMD {
		errs = append(errs, field.Invalid(field.NewPath("spec", "router", "disaggregationThresholdTokens"),
			*r.DisaggregationThresholdTokens, fmt.Sprintf("router %q has no prompt-token threshold to set; "+
				"it is meaningful under %q alone, whose scheduler decides per request whether to split one",
				r.Name, api.RouterLLMD)))
	}
	if engines, known := RouterEngines[r.Name]; known && !slices.Contains(engines, md.Spec.Engine.Name) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "router", "name"), r.Name,
			RouterEngineMismatch(r.Name, md.Spec.Engine.Name)))
	}

	routerPath := field.NewPath("spec", "router")
	var ports []int32
	for i := range md.Spec.Roles {
		role := &md.Spec.Roles[i]
		if proto := ServingProtocol(role); proto != DefaultPortProtocol {
			errs = append(errs, field.Invalid(routerPath, r.Name, fmt.Sprintf(
				"every routed role must use TCP serving ports; role %q uses %s", role.Name, proto)))
		}
		if ServingScheme(role) == "https" {
			errs = append(errs, field.Invalid(routerPath, r.Name, fmt.Sprintf(
				"managed router supports plaintext engine endpoints only; role %q uses HTTPS", role.Name)))
		}
		ports = append(ports, ServingPort(role))
		errs = append(errs, validateRouterPorts(md, role)...)
	}
	slices.Sort(ports)
	ports = slices.Compact(ports)
	if len(ports) > 1 {
		errs = append(errs, field.Invalid(routerPath, r.Name, fmt.Sprintf(
			"every routed role must use the same serving port; got %v", ports)))
	}
	return errs
}

// Ports the operator synthesizes onto routed roles (inject package constants).
const (
	VLLMKVEventsPort          int32 = 5557
	VLLMKVEventsReplayPort    int32 = 5558
	VLLMMooncakeBootstrapPort int32 = 8998
	SGLangBootstrapPort       int32 = 8998
)

func validateRouterPorts(md *api.ModelDeployment, role *api.Role) field.ErrorList {
	var errs field.ErrorList
	routerPath := field.NewPath("spec", "router")
	if len(role.Command) == 0 {
		var reserved []int32
		kind := role.RoleKind()
		switch md.Spec.Engine.Name {
		case api.EngineVLLM:
			if md.Spec.Router.Name == api.RouterLLMD && kind != api.RoleKindDecode {
				reserved = append(reserved, VLLMKVEventsPort, VLLMKVEventsReplayPort)
			}
			if md.Spec.Router.Name == api.RouterLLMD && kind == api.RoleKindPrefill {
				reserved = append(reserved, VLLMMooncakeBootstrapPort)
			}
		case api.EngineSGLang:
			if kind == api.RoleKindPrefill {
				reserved = append(reserved, SGLangBootstrapPort)
			}
		}
		for _, p := range role.Ports {
			if slices.Contains(reserved, p.Port) {
				errs = append(errs, field.Invalid(routerPath, md.Spec.Router.Name, fmt.Sprintf(
					"role %q declares port %d, which the operator reserves for a listener it synthesizes onto "+
						"this role under engine %q and router %q; reserved here are %v",
					role.Name, p.Port, md.Spec.Engine.Name, md.Spec.Router.Name, reserved)))
			}
		}
	}
	if md.Spec.Router.Name != api.RouterLLMD || role.RoleKind() != api.RoleKindDecode || len(role.Command) > 0 {
		return errs
	}
	if port, ok := explicitPort(role.ExtraArgs); ok && port == ServingPort(role) {
		errs = append(errs, field.Invalid(routerPath, md.Spec.Router.Name, fmt.Sprintf(
			"role %q passes --port=%d, the port its Service publishes; the routing proxy a direct decode "+
				"role is fronted by takes that port, so the model server must leave it", role.Name, port)))
	}
	return errs
}

// explicitPort is the value of the last --port in args, in either spelling.
func explicitPort(args []string) (int32, bool) {
	port, found := int32(0), false
	for i, arg := range args {
		if ArgName(arg) != "--port" {
			continue
		}
		_, value, inline := strings.Cut(arg, "=")
		if !inline {
			if i+1 >= len(args) {
				return 0, false
			}
			value = args[i+1]
		}
		parsed, err := strconv.ParseInt(value, 10, 32)
		if err != nil {
			return 0, false
		}
		port, found = int32(parsed), true
	}
	return port, found
}

func validateRouterName(md, old *api.ModelDeployment) field.ErrorList {
	if old.Spec.Router == nil || md.Spec.Router == nil || old.Spec.Router.Name == md.Spec.Router.Name {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("spec", "router", "name"), md.Spec.Router.Name,
		"field is immutable")}
}

// validateIdentity is validateModelDeploymentIdentity: model, engine.name,
// kvCache and the role set with each role's kind, size, instanceType,
// resources and command are frozen.
func validateIdentity(md, old *api.ModelDeployment) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if !reflect.DeepEqual(md.Spec.Model, old.Spec.Model) {
		errs = append(errs, field.Invalid(spec.Child("model"), md.Spec.Model, identityMessage))
	}
	if md.Spec.Engine.Name != old.Spec.Engine.Name {
		errs = append(errs, field.Invalid(spec.Child("engine", "name"), md.Spec.Engine.Name, identityMessage))
	}
	if !reflect.DeepEqual(md.Spec.KVCache, old.Spec.KVCache) {
		errs = append(errs, field.Invalid(spec.Child("kvCache"), md.Spec.KVCache, identityMessage))
	}

	roles := spec.Child("roles")
	stored := map[string]*api.Role{}
	for i := range old.Spec.Roles {
		stored[old.Spec.Roles[i].Name] = &old.Spec.Roles[i]
	}
	incoming := map[string]bool{}
	for i := range md.Spec.Roles {
		role := &md.Spec.Roles[i]
		incoming[role.Name] = true
		was, ok := stored[role.Name]
		rp := roles.Index(i)
		if !ok {
			errs = append(errs, field.Invalid(rp.Child("name"), role.Name, identityMessage))
			continue
		}
		if role.RoleKind() != was.RoleKind() {
			errs = append(errs, field.Invalid(rp.Child("kind"), role.Kind, identityMessage))
		}
		if roleSize(role) != roleSize(was) {
			errs = append(errs, field.Invalid(rp.Child("size"), roleSize(role), sizeFrozenMessage))
		}
		if role.InstanceType != was.InstanceType {
			errs = append(errs, field.Invalid(rp.Child("instanceType"), role.InstanceType, identityMessage))
		}
		if !reflect.DeepEqual(role.Resources, was.Resources) {
			errs = append(errs, field.Invalid(rp.Child("resources"), role.Resources, identityMessage))
		}
		if !reflect.DeepEqual(role.Command, was.Command) {
			errs = append(errs, field.Invalid(rp.Child("command"), role.Command, identityMessage))
		}
	}
	for i := range old.Spec.Roles {
		if name := old.Spec.Roles[i].Name; !incoming[name] {
			errs = append(errs, field.Invalid(roles, name, identityMessage))
		}
	}
	return errs
}

func roleNames(md *api.ModelDeployment) map[string]bool {
	if md == nil {
		return nil
	}
	out := map[string]bool{}
	for i := range md.Spec.Roles {
		out[md.Spec.Roles[i].Name] = true
	}
	return out
}

func roleSize(r *api.Role) int32 {
	if r.Size == nil {
		return DefaultSize
	}
	return *r.Size
}

// ServingPort is the role's serving port: its first declared port, or 8000.
func ServingPort(r *api.Role) int32 {
	if len(r.Ports) > 0 {
		return r.Ports[0].Port
	}
	return api.EngineDefaultPort
}

// ServingProtocol is the protocol of the serving port (TCP by default).
func ServingProtocol(r *api.Role) string {
	if len(r.Ports) > 0 && r.Ports[0].Protocol != "" {
		return r.Ports[0].Protocol
	}
	return DefaultPortProtocol
}

// ServingScheme is "https" when the role's own argv turns on TLS (only
// --ssl-certfile and --ssl-keyfile do, in either spelling), else "http".
func ServingScheme(r *api.Role) string {
	if len(r.Command) > 0 {
		return "http"
	}
	for _, a := range r.ExtraArgs {
		if n := ArgName(a); n == "--ssl-certfile" || n == "--ssl-keyfile" {
			return "https"
		}
	}
	return "http"
}
