package operator

import (
	"encoding/json"

	"github.com/gpustack/routing-conformance/api"
)

// Defaults the CRD schema and the mutating webhook apply (docs/operator.md#spec-fields).
const (
	DefaultReplicas         int32 = 1
	DefaultSize             int32 = 1
	DefaultAccelerator            = "1"
	DefaultKVCacheConnector       = "Mooncake"
	DefaultPortProtocol           = "TCP"
)

// Default applies what reaches storage before validation: the schema
// defaults (kind Server, replicas 1, size 1, port protocol TCP, kvCache
// connector Mooncake) and the mutating webhook's one default, an
// accelerator count of 1 on an acceleratable InstanceType. The sim has no
// InstanceType objects, so every named type counts as acceleratable; an
// explicit value (including "0") is kept, as the webhook keeps it.
// spec.router.replicas has no schema default (absent reads as 1) and stays nil;
// neither has roles[].terminationGracePeriodSeconds (a real API server
// stores it unset; the Pod's own default of 30 s applies downstream).
func Default(md *api.ModelDeployment) {
	if md == nil {
		return
	}
	for i := range md.Spec.Roles {
		r := &md.Spec.Roles[i]
		if r.Kind == "" {
			r.Kind = api.RoleKindServer
		}
		if r.Replicas == nil {
			r.Replicas = api.Ptr(DefaultReplicas)
		}
		if r.Size == nil {
			r.Size = api.Ptr(DefaultSize)
		}
		for j := range r.Ports {
			if r.Ports[j].Protocol == "" {
				r.Ports[j].Protocol = DefaultPortProtocol
			}
		}
		if r.InstanceType == "" {
			// The webhook skips a role naming no type; the schema reports it.
			continue
		}
		if r.Resources == nil {
			r.Resources = &api.Resources{}
		}
		if r.Resources.Accelerator == "" {
			r.Resources.Accelerator = DefaultAccelerator
		}
	}
	if md.Spec.KVCache != nil && md.Spec.KVCache.Connector == "" {
		md.Spec.KVCache.Connector = DefaultKVCacheConnector
	}
}

// DeepCopy returns an independent copy of md. The API types are plain data,
// so a JSON round trip is exact.
func DeepCopy(md *api.ModelDeployment) *api.ModelDeployment {
	if md == nil {
		return nil
	}
	b, err := json.Marshal(md)
	if err != nil {
		// Only unsupported types fail to marshal, and api has none.
		panic("operator: ModelDeployment does not marshal: " + err.Error())
	}
	out := new(api.ModelDeployment)
	if err := json.Unmarshal(b, out); err != nil {
		panic("operator: ModelDeployment does not unmarshal: " + err.Error())
	}
	return out
}
