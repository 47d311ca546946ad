package operator

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/api"
)

// newMD is the minimal admissible deployment for a router/engine pair.
func newMD(router, engine string) *api.ModelDeployment {
	md := &api.ModelDeployment{
		APIVersion: api.APIVersion,
		Kind:       api.Kind,
		Metadata:   api.ObjectMeta{Name: "qwen", Namespace: "team-a"},
		Spec: api.ModelDeploymentSpec{
			Model:  api.Model{Name: "Qwen/Qwen2.5-0.5B-Instruct"},
			Engine: api.Engine{Name: engine, Version: "0.29.0"},
			Roles: []api.Role{{
				Name: "server", Replicas: api.Ptr[int32](2), InstanceType: "gpu-h100",
			}},
		},
	}
	if router != "" {
		md.Spec.Router = &api.Router{Name: router}
	}
	return md
}

func pdMD(router, engine string) *api.ModelDeployment {
	md := newMD(router, engine)
	md.Spec.Roles = []api.Role{
		{Name: "prefill", Kind: api.RoleKindPrefill, InstanceType: "gpu-h100"},
		{Name: "decode", Kind: api.RoleKindDecode, InstanceType: "gpu-h100"},
	}
	return md
}

func engineFor(router string) string {
	if router == api.RouterSGLang {
		return api.EngineSGLang
	}
	return api.EngineVLLM
}

func mustRefuse(t *testing.T, err error, field, message string) {
	t.Helper()
	ae, ok := AsAdmissionError(err)
	if !ok {
		t.Fatalf("want *api.AdmissionError at %s, got %v", field, err)
	}
	// An Invalid refusal reads `Invalid value: <bad value>: <message>`, as
	// the API server prints it; TestRefusalsCarryTheBadValue pins the values.
	got := ae.Message
	if strings.HasPrefix(got, "Invalid value: ") && strings.HasSuffix(got, ": "+message) {
		got = message
	}
	if ae.Field != field || got != message {
		t.Fatalf("refusal mismatch\n got: %s: %s\nwant: %s: %s", ae.Field, ae.Message, field, message)
	}
}

func TestAdmissionRefusesEachOwnedFlagBothForms(t *testing.T) {
	for _, router := range api.Routers {
		for _, flag := range RouterOwnedArgs[router] {
			forms := map[string][]string{
				"separate": {"--policy", "round_robin", flag, "v"},
				"equals":   {"--policy", "round_robin", flag + "=v"},
			}
			for form, extra := range forms {
				t.Run(router+"/"+flag+"/"+form, func(t *testing.T) {
					md := newMD(router, engineFor(router))
					md.Spec.Router.ExtraArgs = extra
					want := fmt.Sprintf("%q is set by the operator for router %q and must not be supplied "+
						"here, because two values for it cannot be told apart", flag, router)
					mustRefuse(t, Admit(nil, md), "spec.router.extraArgs[2]", want)
				})
			}
		}
	}
}

func TestAdmissionOwnedFlagsAreRouterSpecific(t *testing.T) {
	// --kv-connector is vllm-router's; the gateway has no such flag, so it is
	// the router's own business to reject it, not admission's.
	md := newMD(api.RouterSGLang, api.EngineSGLang)
	md.Spec.Router.ExtraArgs = []string{"--kv-connector=mooncake", "--vllm-pd-disaggregation"}
	if err := Admit(nil, md); err != nil {
		t.Fatalf("sglang-gateway must admit vllm-router-only flags: %v", err)
	}
	md = newMD(api.RouterVLLM, api.EngineVLLM)
	md.Spec.Router.ExtraArgs = []string{"--config-file=/x", "--pd-disaggregation"}
	if err := Admit(nil, md); err != nil {
		t.Fatalf("vllm-router must admit flags owned only for other routers: %v", err)
	}
}

func TestAdmissionMatchesFlagNameNotPrefix(t *testing.T) {
	md := newMD(api.RouterVLLM, api.EngineVLLM)
	md.Spec.Router.ExtraArgs = []string{"--hostname=x", "--port-range", "1", "--selectors"}
	if err := Admit(nil, md); err != nil {
		t.Fatalf("flags that merely start like an owned one are admitted: %v", err)
	}
}

func TestAdmissionAdmitsPolicy(t *testing.T) {
	for _, router := range []string{api.RouterVLLM, api.RouterSGLang} {
		for _, extra := range [][]string{
			{"--policy", "round_robin"},
			{"--policy=cache_aware", "--cache-threshold", "0.5"},
			{"--balance-abs-threshold=32", "--balance-rel-threshold", "1.2"},
			{"--request-timeout-secs=60"},
			{"--policy", "not_a_policy"}, // the router, not admission, refuses a bad value
		} {
			md := newMD(router, engineFor(router))
			md.Spec.Router.ExtraArgs = extra
			if err := Admit(nil, md); err != nil {
				t.Errorf("%s %v: want admitted, got %v", router, extra, err)
			}
		}
	}
}

// No router is refused a prefill/decode pair: validateModelDeploymentRouter
// reads the router name on a pair only to reserve ports, and each router
// renders one (docs/operator.md#router-admission-rules;
// gpustack/gpustack-operator@049325a5:pkg/worker/webhooks/worker/model_deployment.go,
// pkg/worker/kvcache/router/argv.go). If the operator ever refuses one,
// this test is where its message belongs.
func TestAdmissionAdmitsPrefillDecodeUnderEveryRouter(t *testing.T) {
	for _, p := range []struct{ router, engine string }{
		{api.RouterVLLM, api.EngineVLLM}, {api.RouterSGLang, api.EngineSGLang},
		{api.RouterLLMD, api.EngineVLLM}, {api.RouterLLMD, api.EngineSGLang},
	} {
		md := pdMD(p.router, p.engine)
		if err := Admit(nil, md); err != nil {
			t.Errorf("%s+%s prefill/decode: want admitted, got %v", p.router, p.engine, err)
		}
	}
}

func TestAdmissionRouterEngineMismatch(t *testing.T) {
	cases := []struct{ router, engine, want string }{
		{api.RouterVLLM, api.EngineSGLang, `router "vllm-router" does not front engine "SGLang"; it accepts vLLM`},
		{api.RouterSGLang, api.EngineVLLM, `router "sglang-gateway" does not front engine "vLLM"; it accepts SGLang`},
	}
	for _, c := range cases {
		mustRefuse(t, Admit(nil, newMD(c.router, c.engine)), "spec.router.name", c.want)
	}
	for _, engine := range api.Engines {
		if err := Admit(nil, newMD(api.RouterLLMD, engine)); err != nil {
			t.Errorf("llm-d-router fronts %s: %v", engine, err)
		}
	}
	if got := RouterEngineMismatch(api.RouterLLMD, "x"); !strings.HasSuffix(got, "it accepts vLLM, SGLang") {
		t.Errorf("list formatting: %s", got)
	}
}

func TestRouterNameImmutable(t *testing.T) {
	old := newMD(api.RouterLLMD, api.EngineVLLM)
	md := newMD(api.RouterVLLM, api.EngineVLLM)
	mustRefuse(t, Admit(old, md), "spec.router.name", "field is immutable")

	// Adding and removing the block are edits, not a change in place.
	if err := Admit(newMD("", api.EngineVLLM), newMD(api.RouterVLLM, api.EngineVLLM)); err != nil {
		t.Errorf("adding spec.router: %v", err)
	}
	if err := Admit(newMD(api.RouterVLLM, api.EngineVLLM), newMD("", api.EngineVLLM)); err != nil {
		t.Errorf("removing spec.router: %v", err)
	}
}

func TestIdentityFieldsAreFrozen(t *testing.T) {
	id := IdentityMessage()
	cases := []struct {
		name, field, message string
		mutate               func(*api.ModelDeployment)
	}{
		{"model", "spec.model", id, func(m *api.ModelDeployment) { m.Spec.Model.Name = "other" }},
		{"engine", "spec.engine.name", id, func(m *api.ModelDeployment) {
			m.Spec.Engine.Name = api.EngineSGLang
			m.Spec.Router = nil
		}},
		{"instanceType", "spec.roles[0].instanceType", id, func(m *api.ModelDeployment) {
			m.Spec.Roles[0].InstanceType = "other"
		}},
		{"size", "spec.roles[0].size", sizeFrozenMessage, func(m *api.ModelDeployment) {
			m.Spec.Roles[0].Size = api.Ptr[int32](2)
		}},
		{"resources", "spec.roles[0].resources", id, func(m *api.ModelDeployment) {
			m.Spec.Roles[0].Resources = &api.Resources{Accelerator: "2"}
		}},
		{"role added", "spec.roles[1].name", id, func(m *api.ModelDeployment) {
			m.Spec.Roles = append(m.Spec.Roles, api.Role{Name: "extra", InstanceType: "gpu-h100"})
		}},
		{"role renamed", "spec.roles[0].name", id, func(m *api.ModelDeployment) { m.Spec.Roles[0].Name = "srv" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			old := newMD(api.RouterVLLM, api.EngineVLLM)
			md := DeepCopy(old)
			c.mutate(md)
			mustRefuse(t, Admit(old, md), c.field, c.message)
		})
	}
}

func TestEditableFieldsAreAdmitted(t *testing.T) {
	old := newMD(api.RouterVLLM, api.EngineVLLM)
	md := DeepCopy(old)
	md.Spec.Engine.Version = "0.30.0"
	md.Spec.Roles[0].Replicas = api.Ptr[int32](5)
	md.Spec.Roles[0].ExtraArgs = []string{"--max-num-seqs", "4"}
	md.Spec.Roles[0].Env = []api.EnvVar{{Name: "SIM_ENGINE_TTFT", Value: "1ms"}}
	md.Spec.Router.ExtraArgs = []string{"--policy", "round_robin"}
	md.Spec.Router.Replicas = api.Ptr[int32](2)
	if err := Admit(old, md); err != nil {
		t.Fatalf("editable fields: %v", err)
	}
}

func TestAdmissionSchemaRules(t *testing.T) {
	cases := []struct {
		name, field, message string
		mutate               func(*api.ModelDeployment)
	}{
		{"model name", "spec.model.name", "Required value", func(m *api.ModelDeployment) { m.Spec.Model.Name = "" }},
		{"engine name", "spec.engine.name", "Required value", func(m *api.ModelDeployment) { m.Spec.Engine.Name = "" }},
		{"engine enum", "spec.engine.name", `Unsupported value: "vllm": supported values: "vLLM", "SGLang"`,
			func(m *api.ModelDeployment) { m.Spec.Engine.Name = "vllm" }},
		{"router enum", "spec.router.name",
			`Unsupported value: "vllm_router": supported values: "llm-d-router", "vllm-router", "sglang-gateway"`,
			func(m *api.ModelDeployment) { m.Spec.Router.Name = "vllm_router" }},
		{"router name", "spec.router.name", "Required value", func(m *api.ModelDeployment) { m.Spec.Router.Name = "" }},
		{"no roles", "spec.roles", "spec.roles in body should have at least 1 items",
			func(m *api.ModelDeployment) { m.Spec.Roles = []api.Role{} }},
		{"role name pattern", "spec.roles[0].name",
			"spec.roles[0].name in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'",
			func(m *api.ModelDeployment) { m.Spec.Roles[0].Name = "Server_1" }},
		{"kind enum", "spec.roles[0].kind", `Unsupported value: "server": supported values: "Server", "Prefill", "Decode"`,
			func(m *api.ModelDeployment) { m.Spec.Roles[0].Kind = "server" }},
		{"replicas min", "spec.roles[0].replicas", "spec.roles[0].replicas in body should be greater than or equal to 1",
			func(m *api.ModelDeployment) { m.Spec.Roles[0].Replicas = api.Ptr[int32](0) }},
		{"replicas max", "spec.roles[0].replicas", "spec.roles[0].replicas in body should be less than or equal to 1024",
			func(m *api.ModelDeployment) { m.Spec.Roles[0].Replicas = api.Ptr[int32](1025) }},
		{"size max", "spec.roles[0].size", "spec.roles[0].size in body should be less than or equal to 64",
			func(m *api.ModelDeployment) { m.Spec.Roles[0].Size = api.Ptr[int32](65) }},
		{"instanceType", "spec.roles[0].instanceType", "Required value",
			func(m *api.ModelDeployment) { m.Spec.Roles[0].InstanceType = "" }},
		{"router replicas", "spec.router.replicas", "spec.router.replicas in body should be greater than or equal to 1",
			func(m *api.ModelDeployment) { m.Spec.Router.Replicas = api.Ptr[int32](0) }},
		{"request timeout", "spec.router.requestTimeoutSeconds",
			"spec.router.requestTimeoutSeconds in body should be greater than or equal to 1",
			func(m *api.ModelDeployment) { m.Spec.Router.RequestTimeoutSeconds = api.Ptr[int32](0) }},
		{"too many roles", "spec.roles", fmt.Sprintf("at most %d roles: every role renders its own replicas, "+
			"Services and queue references, and a deployment naming more than that is a shape this operator "+
			"does not serve — a prefill/decode deployment names two", MaxRoles),
			func(m *api.ModelDeployment) {
				m.Spec.Roles = nil
				for i := range 11 {
					m.Spec.Roles = append(m.Spec.Roles, api.Role{Name: fmt.Sprintf("s%d", i), InstanceType: "t"})
				}
			}},
		{"server mixed", "spec.roles[0].kind", `"Server" cannot be combined with another kind in one deployment: ` +
			`a "Server" role serves whole requests by itself, so a deployment holding one beside a "Prefill" or ` +
			`"Decode" role describes no arrangement the engines' KV transfer configuration can express`,
			func(m *api.ModelDeployment) {
				m.Spec.Roles = append(m.Spec.Roles, api.Role{Name: "p", Kind: api.RoleKindPrefill, InstanceType: "t"})
			}},
		{"prefill repeated", "spec.roles[1].kind", `kind "Prefill" is already declared by role "p1": only "Server" ` +
			`may be declared by more than one role, because a set of servers is a set of equals, whereas nothing ` +
			`consuming these roles expresses a second "Prefill" and the extra role would render into a ` +
			`configuration nothing downstream can reach`,
			func(m *api.ModelDeployment) {
				m.Spec.Roles = []api.Role{
					{Name: "p1", Kind: api.RoleKindPrefill, InstanceType: "t"},
					{Name: "p2", Kind: api.RoleKindPrefill, InstanceType: "t"},
					{Name: "d", Kind: api.RoleKindDecode, InstanceType: "t"},
				}
			}},
		{"threshold off llm-d", "spec.router.disaggregationThresholdTokens",
			`router "vllm-router" has no prompt-token threshold to set; it is meaningful under "llm-d-router" ` +
				`alone, whose scheduler decides per request whether to split one`,
			func(m *api.ModelDeployment) { m.Spec.Router.DisaggregationThresholdTokens = api.Ptr[int32](16) }},
		{"engine version", "spec.engine.version", `Required value: role "server" names no image of its own, so ` +
			`its image is synthesized from the engine and its version, and an empty version assembles a tag ` +
			`naming something never typed. Give the engine a version, or name an image on the role`,
			func(m *api.ModelDeployment) { m.Spec.Engine.Version = "" }},
		{"serving ports differ", "spec.router", "every routed role must use the same serving port; got [8000 9000]",
			func(m *api.ModelDeployment) {
				m.Spec.Roles = append(m.Spec.Roles, api.Role{Name: "s2", InstanceType: "t",
					Ports: []api.Port{{Port: 9000}}})
			}},
		{"https under router", "spec.router",
			`managed router supports plaintext engine endpoints only; role "server" uses HTTPS`,
			func(m *api.ModelDeployment) { m.Spec.Roles[0].ExtraArgs = []string{"--ssl-certfile=/c"} }},
		{"engine owned arg", "spec.roles[0].extraArgs[0]", `"--kv-transfer-config" is set by the operator for ` +
			`engine "vLLM" and must not be supplied here, because two values for it cannot be told apart; ` +
			`replace the whole command line through spec.roles[0].command to own it instead`,
			func(m *api.ModelDeployment) { m.Spec.Roles[0].ExtraArgs = []string{"--kv-transfer-config={}"} }},
		{"role named router", "spec.roles[0].name", `the Service fronting role "router" would be named ` +
			`"qwen-router", and so would the Service fronting the managed router. One name is one object, and ` +
			`the two need different shapes, so whichever is written last leaves the other without the ` +
			`addresses it publishes. Rename this role`,
			func(m *api.ModelDeployment) { m.Spec.Roles[0].Name = "router" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			md := newMD(api.RouterVLLM, api.EngineVLLM)
			c.mutate(md)
			mustRefuse(t, Admit(nil, md), c.field, c.message)
		})
	}
}

func TestAdmissionEngineVersionNotNeededWithImage(t *testing.T) {
	md := newMD(api.RouterVLLM, api.EngineVLLM)
	md.Spec.Engine.Version = ""
	md.Spec.Roles[0].Image = "vllm/vllm-openai:v0.29.0"
	if err := Admit(nil, md); err != nil {
		t.Fatalf("a role naming its image needs no engine version: %v", err)
	}
}

func TestAdmissionLLMDRefusesConfigFile(t *testing.T) {
	md := newMD(api.RouterLLMD, api.EngineSGLang)
	md.Spec.Router.ExtraArgs = []string{"--config-file", "/tmp/x.yaml"}
	mustRefuse(t, Admit(nil, md), "spec.router.extraArgs[0]", RouterRefusal("--config-file", api.RouterLLMD))
	md.Spec.Router.ExtraArgs = nil
	md.Spec.Router.DisaggregationThresholdTokens = api.Ptr[int32](0)
	if err := Admit(nil, md); err != nil {
		t.Fatalf("llm-d-router takes a threshold: %v", err)
	}
}

func TestValidateReportsSchemaBeforeWebhook(t *testing.T) {
	md := newMD(api.RouterVLLM, api.EngineVLLM)
	md.Spec.Router.ExtraArgs = []string{"--port=1"}
	md.Spec.Roles[0].Replicas = api.Ptr[int32](0)
	errs := Validate(nil, md)
	if len(errs) != 1 || errs[0].Field != "spec.roles[0].replicas" {
		t.Fatalf("the schema refusal hides the webhook's: %v", errs)
	}
	var _ error = errs[0] // *api.AdmissionError
	var _ *api.AdmissionError = errs[0]
}

func TestDefaultAppliesSchemaAndWebhookDefaults(t *testing.T) {
	md := newMD(api.RouterVLLM, api.EngineVLLM)
	md.Spec.Roles[0].Replicas = nil
	md.Spec.Roles = append(md.Spec.Roles, api.Role{Name: "b", InstanceType: "t",
		Resources: &api.Resources{Accelerator: "0"}, Ports: []api.Port{{Port: 8000}}})
	Default(md)
	r := md.Spec.Roles[0]
	if r.Kind != api.RoleKindServer || *r.Replicas != 1 || *r.Size != 1 || r.Resources.Accelerator != "1" {
		t.Fatalf("defaults not applied: %+v", r)
	}
	// The operator's schema has no default for the grace period: a real API
	// server stores the role without one.
	if r.TerminationGracePeriodSeconds != nil {
		t.Fatalf("terminationGracePeriodSeconds defaulted to %d; the schema has no default", *r.TerminationGracePeriodSeconds)
	}
	if md.Spec.Roles[1].Resources.Accelerator != "0" {
		t.Fatalf("an explicit zero accelerator is kept")
	}
	if md.Spec.Roles[1].Ports[0].Protocol != "TCP" {
		t.Fatalf("port protocol defaults to TCP")
	}
	if md.Spec.Router.Replicas != nil {
		t.Fatalf("router replicas has no schema default")
	}
}

// Every refusal carries its bad value the way the operator's webhook writes
// it (field.Invalid with the value, through apierrors.NewInvalid), both in
// the field errors a webhook serves and in the sim's AdmissionError.
func TestRefusalsCarryTheBadValue(t *testing.T) {
	md := newMD(api.RouterVLLM, api.EngineVLLM)
	md.Spec.Router.ExtraArgs = []string{"--port=9000"}
	errs := FieldErrors(nil, md)
	if len(errs) != 1 || errs[0].BadValue != "--port=9000" {
		t.Fatalf("field errors %v, want one with bad value --port=9000", errs)
	}
	want := `spec.router.extraArgs[0]: Invalid value: "--port=9000": ` + RouterRefusal("--port", api.RouterVLLM)
	if errs[0].Error() != want {
		t.Errorf("field error\n got: %s\nwant: %s", errs[0].Error(), want)
	}
	ae, _ := AsAdmissionError(Admit(nil, md))
	if ae == nil || ae.Field+": "+ae.Message != want {
		t.Errorf("AdmissionError %+v, want %s", ae, want)
	}

	old := newMD(api.RouterVLLM, api.EngineVLLM)
	renamed := newMD(api.RouterLLMD, api.EngineVLLM)
	if ae, _ := AsAdmissionError(Admit(old, renamed)); ae == nil || ae.Message != `Invalid value: "llm-d-router": field is immutable` {
		t.Errorf("router rename: %+v, want the new name as the bad value", ae)
	}
}
