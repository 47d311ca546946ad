package operator

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpustack/routing-conformance/api"
)

// Bounds from the CRD schema and the webhook (docs/operator.md#spec-fields).
const (
	MaxRoles               = 10
	MaxReplicas      int32 = 1024
	MaxSize          int32 = 64
	MaxModelNameLen        = 253
	MaxRoleNameLen         = 63
	MaxEngineVersion       = 64
	MinGracePeriod   int64 = 15
	MaxGracePeriod   int64 = 3600
	RoleNamePattern        = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	identityMessage        = "this is part of what makes this deployment the deployment it is: a " +
		"different value describes a different deployment, which is created rather than edited"
	sizeFrozenMessage = "an instance's size is fixed when the deployment is created: the Pods of a " +
		"running instance cannot become a different number of Pods. Change replicas to run more or " +
		"fewer instances, or create a deployment that declares the size you want"
)

// RouterOwnedArgs is, per router, the flags the operator renders and so
// refuses in spec.router.extraArgs (webhook modelDeploymentRouterOwnedArgs).
var RouterOwnedArgs = map[string][]string{
	api.RouterLLMD: {
		"--endpoint-selector", "--endpoint-target-ports", "--config-file",
		"--secure-serving", "--grpc-health-port", "--metrics-endpoint-auth",
	},
	api.RouterVLLM: {
		"--host", "--port", "--prometheus-host", "--prometheus-port", "--kv-connector",
		"--service-discovery", "--service-discovery-namespace", "--service-discovery-port",
		"--selector", "--prefill-selector", "--decode-selector", "--vllm-pd-disaggregation",
	},
	api.RouterSGLang: {
		"--host", "--port", "--prometheus-host", "--prometheus-port",
		"--service-discovery", "--service-discovery-namespace", "--service-discovery-port",
		"--selector", "--prefill-selector", "--decode-selector", "--pd-disaggregation",
	},
}

// RouterEngines is which engines each router fronts (webhook
// modelDeploymentRouterEngines), in the order the refusal lists them.
var RouterEngines = map[string][]string{
	api.RouterLLMD:   {api.EngineVLLM, api.EngineSGLang},
	api.RouterVLLM:   {api.EngineVLLM},
	api.RouterSGLang: {api.EngineSGLang},
}

// EngineOwnedArgs is, per engine, the role extraArgs the operator owns (the
// KV cache connector's flags, modelDeploymentOwnedKeys).
var EngineOwnedArgs = map[string][]string{
	api.EngineVLLM:   {"--kv-transfer-config"},
	api.EngineSGLang: {"--hicache-storage-backend", "--hicache-storage-backend-extra-config"},
}

// KVTransferProtocols is the spec.kvTransfer.protocol enum.
var KVTransferProtocols = []string{"Auto", "TCP", "RDMA", "EFA", "CANN", "ROCM"}

// PortProtocols is the spec.roles[].ports[].protocol enum (core/v1 Protocol).
var PortProtocols = []string{"TCP", "UDP", "SCTP"}

// ArgName reduces a command-line entry to the flag name ownership is decided
// on, so "--port=1" and "--port" answer alike (ModelDeploymentArgName).
func ArgName(arg string) string {
	name, _, _ := strings.Cut(arg, "=")
	return name
}

// RouterRefusal is the webhook's message for an owned router flag.
func RouterRefusal(flag, router string) string {
	return fmt.Sprintf("%q is set by the operator for router %q and must not be supplied here, "+
		"because two values for it cannot be told apart", flag, router)
}

// RouterEngineMismatch is the webhook's message for a router that does not
// front the engine.
func RouterEngineMismatch(router, engine string) string {
	return fmt.Sprintf("router %q does not front engine %q; it accepts %s",
		router, engine, strings.Join(RouterEngines[router], ", "))
}

// IdentityMessage is the reason every identity refusal carries.
func IdentityMessage() string { return identityMessage }

// Admit validates a create (old == nil) or an update as the API server and
// the validating webhook would, after applying Default to copies of both. It
// returns nil or the first refusal as a *api.AdmissionError; Validate
// returns all of them.
func Admit(old, md *api.ModelDeployment) error {
	errs := Validate(old, md)
	if len(errs) == 0 {
		return nil
	}
	return errs[0]
}

// Validate returns every refusal, schema errors first: the API server checks
// the structural schema before it calls the validating webhook, so a schema
// refusal hides the webhook's.
//
// AdmissionError.Message is the refusal as the API server prints it after
// the field path, bad value included, e.g. `Invalid value: "--port=1":
// "--port" is set by the operator ...`, `Required value` or `Unsupported
// value: "x": supported values: ...` (field.Error.ErrorBody).
func Validate(old, md *api.ModelDeployment) []*api.AdmissionError {
	if md == nil {
		return []*api.AdmissionError{{Message: "no ModelDeployment given"}}
	}
	return toAdmission(FieldErrors(old, md))
}

// FieldErrors is Validate's refusals as the field errors the operator's
// webhook hands to apierrors.NewInvalid (ValidateCreate, ValidateUpdate in
// gpustack/gpustack-operator pkg/worker/webhooks/worker/model_deployment.go),
// each with its bad value, so a webhook serving them reads exactly as the
// operator's: `spec.router.extraArgs[0]: Invalid value: "--port": ...`.
// Defaults are applied to copies of both objects first.
func FieldErrors(old, md *api.ModelDeployment) field.ErrorList {
	if md == nil {
		return field.ErrorList{field.Required(field.NewPath("spec"), "no ModelDeployment given")}
	}
	md = DeepCopy(md)
	Default(md)
	if old != nil {
		old = DeepCopy(old)
		Default(old)
	}
	if errs := validateSchema(md); len(errs) > 0 {
		return errs
	}
	errs := validateObject(md, roleNames(old))
	if old != nil {
		errs = append(errs, validateIdentity(md, old)...)
		errs = append(errs, validateRouterName(md, old)...)
	}
	return errs
}

func toAdmission(errs field.ErrorList) []*api.AdmissionError {
	out := make([]*api.AdmissionError, 0, len(errs))
	for _, e := range errs {
		out = append(out, &api.AdmissionError{Field: e.Field, Message: e.ErrorBody()})
	}
	return out
}

// AsAdmissionError reports whether err is an admission refusal.
func AsAdmissionError(err error) (*api.AdmissionError, bool) {
	var ae *api.AdmissionError
	ok := errors.As(err, &ae)
	return ae, ok
}

// validateSchema holds what the CRD's structural schema enforces.
func validateSchema(md *api.ModelDeployment) field.ErrorList {
	var errs field.ErrorList
	meta := field.NewPath("metadata")
	if md.Metadata.Name == "" {
		errs = append(errs, field.Required(meta.Child("name"), "name or generateName is required"))
	} else {
		for _, msg := range isDNS1123Subdomain(md.Metadata.Name) {
			errs = append(errs, field.Invalid(meta.Child("name"), md.Metadata.Name, msg))
		}
	}

	spec := field.NewPath("spec")
	s := &md.Spec
	switch {
	case s.Model.Name == "":
		errs = append(errs, field.Required(spec.Child("model", "name"), ""))
	case len(s.Model.Name) > MaxModelNameLen:
		errs = append(errs, field.TooLong(spec.Child("model", "name"), s.Model.Name, MaxModelNameLen))
	}
	if s.Model.ArtifactRef != nil && s.Model.ArtifactRef.Name == "" {
		errs = append(errs, field.Required(spec.Child("model", "artifactRef", "name"), ""))
	}

	switch {
	case s.Engine.Name == "":
		errs = append(errs, field.Required(spec.Child("engine", "name"), ""))
	case !slices.Contains(api.Engines, s.Engine.Name):
		errs = append(errs, field.NotSupported(spec.Child("engine", "name"), s.Engine.Name, api.Engines))
	}
	if len(s.Engine.Version) > MaxEngineVersion {
		errs = append(errs, field.TooLong(spec.Child("engine", "version"), s.Engine.Version, MaxEngineVersion))
	}

	roles := spec.Child("roles")
	switch {
	case s.Roles == nil:
		errs = append(errs, field.Required(roles, ""))
	case len(s.Roles) == 0:
		errs = append(errs, field.Invalid(roles, 0, "spec.roles in body should have at least 1 items"))
	}
	seen := map[string]bool{}
	for i := range s.Roles {
		errs = append(errs, validateRoleSchema(roles.Index(i), &s.Roles[i])...)
		if n := s.Roles[i].Name; n != "" {
			if seen[n] {
				// listType=map keyed on name: the API server owns this refusal.
				errs = append(errs, field.Duplicate(roles.Index(i), map[string]string{"name": n}))
			}
			seen[n] = true
		}
	}

	if r := s.Router; r != nil {
		rp := spec.Child("router")
		switch {
		case r.Name == "":
			errs = append(errs, field.Required(rp.Child("name"), ""))
		case !slices.Contains(api.Routers, r.Name):
			errs = append(errs, field.NotSupported(rp.Child("name"), r.Name, api.Routers))
		}
		errs = append(errs, minimum(rp.Child("replicas"), r.Replicas, 1)...)
		errs = append(errs, minimum(rp.Child("requestTimeoutSeconds"), r.RequestTimeoutSeconds, 1)...)
		errs = append(errs, minimum(rp.Child("disaggregationThresholdTokens"), r.DisaggregationThresholdTokens, 0)...)
		if r.ImagePullPolicy != "" {
			errs = append(errs, enum(rp.Child("imagePullPolicy"), r.ImagePullPolicy, pullPolicies)...)
		}
	}
	if kc := s.KVCache; kc != nil {
		errs = append(errs, enum(spec.Child("kvCache", "connector"), kc.Connector, []string{DefaultKVCacheConnector})...)
	}
	if kt := s.KVTransfer; kt != nil && kt.Protocol != "" {
		errs = append(errs, enum(spec.Child("kvTransfer", "protocol"), kt.Protocol, KVTransferProtocols)...)
	}
	return errs
}

var pullPolicies = []string{"Always", "IfNotPresent", "Never"}

func validateRoleSchema(p *field.Path, r *api.Role) field.ErrorList {
	var errs field.ErrorList
	switch {
	case r.Name == "":
		errs = append(errs, field.Required(p.Child("name"), ""))
	case len(r.Name) > MaxRoleNameLen:
		errs = append(errs, field.TooLong(p.Child("name"), r.Name, MaxRoleNameLen))
	case !roleNameRE.MatchString(r.Name):
		errs = append(errs, field.Invalid(p.Child("name"), r.Name,
			fmt.Sprintf("%s in body should match '%s'", p.Child("name"), RoleNamePattern)))
	}
	errs = append(errs, enum(p.Child("kind"), r.Kind, api.RoleKinds)...)
	errs = append(errs, bounded(p.Child("replicas"), r.Replicas, 1, MaxReplicas)...)
	errs = append(errs, bounded(p.Child("size"), r.Size, 1, MaxSize)...)
	if r.InstanceType == "" {
		errs = append(errs, field.Required(p.Child("instanceType"), ""))
	}
	if r.ImagePullPolicy != "" {
		errs = append(errs, enum(p.Child("imagePullPolicy"), r.ImagePullPolicy, pullPolicies)...)
	}
	for j, port := range r.Ports {
		pp := p.Child("ports").Index(j)
		errs = append(errs, bounded(pp.Child("port"), &port.Port, 1, 65535)...)
		errs = append(errs, enum(pp.Child("protocol"), port.Protocol, PortProtocols)...)
	}
	errs = append(errs, bounded(p.Child("terminationGracePeriodSeconds"), r.TerminationGracePeriodSeconds,
		MinGracePeriod, MaxGracePeriod)...)
	for j, e := range r.Env {
		if e.Name == "" {
			errs = append(errs, field.Required(p.Child("env").Index(j).Child("name"), ""))
		}
	}
	if r.Resources != nil && r.Resources.Accelerator != "" {
		if n, err := strconv.ParseInt(r.Resources.Accelerator, 10, 64); err != nil || n < 0 {
			errs = append(errs, field.Invalid(p.Child("resources", "accelerator"), r.Resources.Accelerator,
				"must be a non-negative whole number of accelerators"))
		}
	}
	return errs
}

func enum(p *field.Path, v string, values []string) field.ErrorList {
	if slices.Contains(values, v) {
		return nil
	}
	return field.ErrorList{field.NotSupported(p, v, values)}
}

type integer interface{ ~int32 | ~int64 }

func minimum[T integer](p *field.Path, v *T, lo T) field.ErrorList {
	if v == nil || *v >= lo {
		return nil
	}
	return field.ErrorList{field.Invalid(p, *v,
		fmt.Sprintf("%s in body should be greater than or equal to %d", p, lo))}
}

func bounded[T integer](p *field.Path, v *T, lo, hi T) field.ErrorList {
	if v == nil {
		return nil
	}
	if *v < lo {
		return minimum(p, v, lo)
	}
	if *v > hi {
		return field.ErrorList{field.Invalid(p, *v,
			fmt.Sprintf("%s in body should be less than or equal to %d", p, hi))}
	}
	return nil
}
