package policy

import "fmt"

func newPolicy(flavor Flavor, name string, cfg Config, opts ...Option) (Policy, error) {
	return nil, fmt.Errorf("policy %q: not implemented yet", name)
}
