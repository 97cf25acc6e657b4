package engine

import "strings"

// Attribute and channel maps (E33) are pure naming on top of the plain
// attributes and channels: a definition declares a map by listing its name
// with a trailing '/' in Attributes or Channels ("customers/"), and each
// instance is an ordinary attribute or channel named
// "<name>/<escaped key>" ("customers/c-42"). Every record, queue, lock and
// value check works on that wire name unchanged; only the checks of a name
// against the definition look for a map when no plain declaration matches,
// so flows without maps pay nothing.
//
// The key is escaped so that the last '/' of a wire name always separates
// the map's name from the key and distinct keys give distinct names: '%'
// becomes "%25" and '/' becomes "%2F", nothing else changes. An instance
// name's key must be non-empty and canonically escaped (every '%' starts
// "%25" or "%2F"); anything else is not an instance of the map, so each
// instance has exactly one wire name. A plain attribute or channel whose
// name is an instance name of a declared map is refused in the definition,
// so the two cannot collide.

// MapInstanceDecl returns the map declaration ("<name>/") that the wire
// name is a valid instance of, and false when it is none.
func MapInstanceDecl(wire string) (decl string, ok bool) {
	i := strings.LastIndexByte(wire, '/')
	if i <= 0 || i == len(wire)-1 || !validEscapedKey(wire[i+1:]) {
		return "", false
	}
	return wire[:i+1], true
}

// EscapeMapKey escapes an instance key for the wire name.
func EscapeMapKey(key string) string {
	if !strings.ContainsAny(key, "%/") {
		return key
	}
	r := strings.NewReplacer("%", "%25", "/", "%2F")
	return r.Replace(key)
}

// UnescapeMapKey reverses EscapeMapKey; false when s is not a canonical
// escaped key.
func UnescapeMapKey(s string) (string, bool) {
	if !validEscapedKey(s) {
		return "", false
	}
	if !strings.Contains(s, "%") {
		return s, true
	}
	return strings.NewReplacer("%25", "%", "%2F", "/").Replace(s), true
}

func validEscapedKey(s string) bool {
	if s == "" || strings.IndexByte(s, '/') >= 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '%' {
			if i+2 >= len(s) {
				return false
			}
			if e := s[i+1 : i+3]; e != "25" && e != "2F" {
				return false
			}
			i += 2
		}
	}
	return true
}

// declaredName returns the declared name that covers name in decls: name
// itself, else the map it is an instance of; false when neither is
// declared. A map's own declaration ("<name>/") covers nothing.
func declaredName(decls []string, name string) (string, bool) {
	if name == "" || name[len(name)-1] == '/' {
		return "", false
	}
	if containsString(decls, name) {
		return name, true
	}
	if decl, ok := MapInstanceDecl(name); ok && containsString(decls, decl) {
		return decl, true
	}
	return "", false
}

// validateMapDecls checks one kind of declared names: a map's name is not
// empty, and no plain name is an instance of a declared map.
func validateMapDecls(field, kind string, decls []string) error {
	for _, n := range decls {
		if n == "/" {
			return invalidArg(field, "%s map with an empty name", kind)
		}
		if strings.HasSuffix(n, "/") || strings.IndexByte(n, '/') < 0 {
			continue
		}
		if decl, ok := MapInstanceDecl(n); ok && containsString(decls, decl) {
			return invalidArg(field, "%s %q collides with an instance of the %s map %q", kind, n, kind, strings.TrimSuffix(decl, "/"))
		}
	}
	return nil
}

// attributeType returns the declared type of an attribute or of the map
// it is an instance of (nil: none declared).
func (def *FlowDefinition) attributeType(name string) *ValueType {
	if vt, ok := def.AttributeTypes[name]; ok {
		return vt
	}
	if decl, ok := declaredName(def.Attributes, name); ok {
		return def.AttributeTypes[decl]
	}
	return nil
}

// channelType is attributeType for channels.
func (def *FlowDefinition) channelType(name string) *ValueType {
	if vt, ok := def.ChannelTypes[name]; ok {
		return vt
	}
	if decl, ok := declaredName(def.Channels, name); ok {
		return def.ChannelTypes[decl]
	}
	return nil
}
