package tree

// impl is replaced by the real implementation; the API above is stable.
type impl struct{}

func newImpl() *impl                               { return &impl{} }
func (*impl) insert(string, string)                {}
func (*impl) prefixMatch(string) (int, string)     { return 0, "" }
func (*impl) prefixMatchTenant(string, string) int { return 0 }
func (*impl) removeTenant(string)                  {}
func (*impl) tenantCharCount(string) int           { return 0 }
func (*impl) tenantCharCounts() map[string]int     { return map[string]int{} }
func (*impl) tenants() []string                    { return nil }
func (*impl) evictTenantsBySize(int)               {}
