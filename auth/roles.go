package auth

import (
	"strings"
)

// RoleMap gives a person a role from their groups: the highest role one of
// whose groups they are in (IPLEDGER_ROLE_ADMIN_GROUPS,
// IPLEDGER_ROLE_OPERATOR_GROUPS, IPLEDGER_ROLE_VIEWER_GROUPS). The same
// map serves OIDC sign-in, JWT bearer tokens and the trusted proxy, so a
// person has one role however they arrive. Group names are compared
// exactly: identity providers treat "Admins" and "admins" as two groups.
type RoleMap struct {
	admin, operator, viewer map[string]bool
}

// NewRoleMap builds the map from the three lists of group names.
func NewRoleMap(admin, operator, viewer []string) RoleMap {
	set := func(gs []string) map[string]bool {
		m := map[string]bool{}
		for _, g := range gs {
			if g = strings.TrimSpace(g); g != "" {
				m[g] = true
			}
		}
		return m
	}
	return RoleMap{admin: set(admin), operator: set(operator), viewer: set(viewer)}
}

// Empty reports that no group is mapped to any role: every person would be
// refused.
func (m RoleMap) Empty() bool { return len(m.admin)+len(m.operator)+len(m.viewer) == 0 }

// Role returns the highest role of groups, or false when none of them is
// mapped: such a person is refused, never given a session without a role.
func (m RoleMap) Role(groups []string) (Role, bool) {
	best := Role("")
	for _, g := range groups {
		switch {
		case m.admin[g]:
			return RoleAdmin, true
		case m.operator[g]:
			best = RoleOperator
		case m.viewer[g] && best == "":
			best = RoleViewer
		}
	}
	return best, best != ""
}

// SplitList splits a comma-separated setting value into its trimmed,
// non-empty items.
func SplitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
