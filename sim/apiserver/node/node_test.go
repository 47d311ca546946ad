package node

import (
	"strings"
	"testing"
)

// The node's address is the first of the Pod range unless given: the sim
// kubelet leaves the range's first /24 to the node.
func TestOptionsTakeTheNodeAddressFromThePodRange(t *testing.T) {
	o, err := Options{PodCIDR: "10.244.0.0/16"}.withDefaults()
	if err != nil || o.IP != "10.244.0.1" || o.Name != DefaultName {
		t.Errorf("defaults = %+v, %v; want IP 10.244.0.1, name %s", o, err, DefaultName)
	}
	if o, err := (Options{PodCIDR: "10.244.0.0/16", IP: "10.244.0.9"}).withDefaults(); err != nil || o.IP != "10.244.0.9" {
		t.Errorf("an explicit IP: %+v, %v", o, err)
	}
	for cidr, want := range map[string]string{"": "PodCIDR is required", "10.244.0.0": "not an IPv4 range", "fd00::/64": "not an IPv4 range"} {
		if _, err := (Options{PodCIDR: cidr}).withDefaults(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("PodCIDR %q: %v, want an error containing %q", cidr, err, want)
		}
	}
}
