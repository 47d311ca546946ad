package tree

import "fmt"

// checkInvariants verifies the structure the source maintains:
//   - every non-root node has text, is linked from its parent under its first
//     character, and points back to that parent;
//   - a child's tenants are a subset of its parent's;
//   - every tenant's char count equals the characters of the nodes it holds.
func (t *impl) checkInvariants() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	sizes := map[string]int{}
	stack := []*node{t.root}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for tenant := range n.tenants {
			sizes[tenant] += len(n.text)
			if n != t.root {
				if _, ok := t.charCount[tenant]; !ok {
					return fmt.Errorf("node %q holds tenant %q that has no char count", string(n.text), tenant)
				}
			}
		}
		for r, c := range n.children {
			if len(c.text) == 0 {
				return fmt.Errorf("child of %q under %q has empty text", string(n.text), r)
			}
			if c.text[0] != r {
				return fmt.Errorf("child %q linked under %q", string(c.text), r)
			}
			if c.parent != n {
				return fmt.Errorf("child %q has the wrong parent", string(c.text))
			}
			for tenant := range c.tenants {
				if _, ok := n.tenants[tenant]; !ok {
					return fmt.Errorf("child %q holds %q but parent %q does not", string(c.text), tenant, string(n.text))
				}
			}
			stack = append(stack, c)
		}
	}
	for tenant, count := range t.charCount {
		if sizes[tenant] != count {
			return fmt.Errorf("tenant %q: char count %d, nodes hold %d", tenant, count, sizes[tenant])
		}
	}
	return nil
}
