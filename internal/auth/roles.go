// Package auth is who may call the API: the roles (reader, client, worker
// for some flow types, admin), the principals callers authenticate as (a
// bearer token from auth.tokensFile or admin.credentialFile, a client
// certificate whose subject or SAN auth.certificateRoles names), and the
// tokens file, re-read when it changes. The server's one interceptor
// (package server, auth.go) asks an Authorizer who a caller is and checks
// the role its method needs.
package auth

import (
	"fmt"
	"slices"
	"strings"
)

// Permission is what a method needs.
type Permission int

// Permissions, from the least to the most. Open needs nothing (health
// checks); Worker is the worker stream, further limited to the granted
// flow types.
const (
	Open Permission = iota
	Reader
	Client
	Worker
	Admin
)

func (p Permission) String() string {
	switch p {
	case Open:
		return "none"
	case Reader:
		return "reader"
	case Client:
		return "client"
	case Worker:
		return "worker"
	case Admin:
		return "admin"
	}
	return fmt.Sprintf("Permission(%d)", int(p))
}

// Grant is what a principal may do: the union of its roles. The zero
// Grant may do nothing but the open methods.
type Grant struct {
	reader, client, admin bool
	// worker is set for a worker role; flowTypes are its flow types, nil
	// with allTypes for "worker:*".
	worker    bool
	allTypes  bool
	flowTypes []string
}

// All is the grant of every role (open mode, admin).
func All() Grant { return Grant{reader: true, client: true, admin: true, worker: true, allTypes: true} }

// Allows reports whether g has permission p. Admin has every permission;
// client includes reader.
func (g Grant) Allows(p Permission) bool {
	switch p {
	case Open:
		return true
	case Reader:
		return g.reader || g.client || g.admin
	case Client:
		return g.client || g.admin
	case Worker:
		return g.worker || g.admin
	case Admin:
		return g.admin
	}
	return false
}

// AllowsFlowType reports whether g may serve flowType on the worker
// stream.
func (g Grant) AllowsFlowType(flowType string) bool {
	return g.admin || (g.worker && (g.allTypes || slices.Contains(g.flowTypes, flowType)))
}

// Union returns the grant of both g and o.
func (g Grant) Union(o Grant) Grant {
	u := Grant{reader: g.reader || o.reader, client: g.client || o.client, admin: g.admin || o.admin,
		worker: g.worker || o.worker, allTypes: g.allTypes || o.allTypes}
	u.flowTypes = append(slices.Clone(g.flowTypes), o.flowTypes...)
	slices.Sort(u.flowTypes)
	u.flowTypes = slices.Compact(u.flowTypes)
	return u
}

// String renders g as ParseGrant reads it ("client+worker:order").
func (g Grant) String() string {
	var parts []string
	if g.admin {
		return "admin"
	}
	switch {
	case g.client:
		parts = append(parts, "client")
	case g.reader:
		parts = append(parts, "reader")
	}
	if g.worker {
		if g.allTypes {
			parts = append(parts, "worker:*")
		} else {
			parts = append(parts, "worker:"+strings.Join(g.flowTypes, ","))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "+")
}

// ParseGrant reads a role, or roles joined by "+": "reader", "client",
// "admin", "worker:order,approval" (a worker for those flow types) or
// "worker:*" (every flow type), for example "client+worker:order".
func ParseGrant(s string) (Grant, error) {
	var g Grant
	if strings.TrimSpace(s) == "" {
		return g, fmt.Errorf("empty role; want reader, client, worker:TYPE[,TYPE...], worker:* or admin")
	}
	for r := range strings.SplitSeq(s, "+") {
		switch name, types, hasTypes := strings.Cut(r, ":"); {
		case r == "reader":
			g.reader = true
		case r == "client":
			g.client = true
		case r == "admin":
			g.admin = true
		case name == "worker" && !hasTypes:
			return g, fmt.Errorf("role %q needs its flow types: worker:order,approval, or worker:* for every flow type", r)
		case name == "worker":
			g.worker = true
			if types == "*" {
				g.allTypes = true
				continue
			}
			for t := range strings.SplitSeq(types, ",") {
				if t == "" || t == "*" {
					return g, fmt.Errorf("role %q: a flow type list must not be empty or mix \"*\" with names", r)
				}
				g.flowTypes = append(g.flowTypes, t)
			}
		default:
			return g, fmt.Errorf("unknown role %q; want reader, client, worker:TYPE[,TYPE...], worker:* or admin", r)
		}
	}
	slices.Sort(g.flowTypes)
	g.flowTypes = slices.Compact(g.flowTypes)
	return g, nil
}

// Principal is an authenticated caller.
type Principal struct {
	// Identity names the caller in logs, never its secret: "token
	// billing-api", "certificate CN=orders-worker", "anonymous".
	Identity string
	Grant    Grant
}
