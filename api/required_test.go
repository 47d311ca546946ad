package api

import (
	"encoding/json"
	"strings"
	"testing"
)

// Fields the operator's schema requires are written even at their zero
// value: a real API server refuses an object that leaves one out (an env
// entry without value, a role status without quotaReserved, unmanaged or
// kind, a router role without kind).
func TestRequiredFieldsAreWrittenAtTheirZeroValue(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want []string
	}{
		{EnvVar{Name: "EMPTY"}, []string{`"value":""`}},
		{RoleStatus{Name: "server"}, []string{`"kind":""`, `"desired":0`, `"ready":0`, `"quotaReserved":0`, `"unmanaged":false`}},
		{RouterRoleStatus{Name: "server"}, []string{`"kind":""`}},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%T marshals to %s, missing %s", tc.v, b, w)
			}
		}
	}
	if b, _ := json.Marshal(ModelDeploymentStatus{}); strings.Contains(string(b), "observedGeneration") {
		t.Errorf("status marshals an observedGeneration the operator's API does not have: %s", b)
	}
}
