package policy

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"unicode"
)

// sessionHeaderNames is VR hash_key.rs SESSION_HEADER_NAMES, in priority
// order (x-correlation-id deliberately before x-request-id).
var sessionHeaderNames = []string{
	"x-session-id",
	"x-user-id",
	"x-tenant-id",
	"x-correlation-id",
	"x-request-id",
	"x-trace-id",
}

// visibleASCII is http's HeaderValue::to_str test.
func visibleASCII(v string) bool {
	for i := 0; i < len(v); i++ {
		b := v[i]
		if (b < 32 || b >= 127) && b != '\t' {
			return false
		}
	}
	return true
}

// vrRequestHeaders is VR's headers_to_request_headers: lower-cased names,
// values that are visible ASCII, a later value of a repeated header
// overwriting an earlier one (collect into a HashMap).
func vrRequestHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range h[k] {
			if visibleASCII(v) {
				out[strings.ToLower(k)] = v
			}
		}
	}
	return out
}

// firstHeader is http's HeaderMap::get + to_str: the first value of the
// header, or false when absent or not visible ASCII.
func firstHeader(h http.Header, name string) (string, bool) {
	if h == nil {
		return "", false
	}
	vs := h.Values(name)
	if len(vs) == 0 || !visibleASCII(vs[0]) {
		return "", false
	}
	return vs[0], true
}

// extractHashKey is VR hash_key.rs extract_hash_key: a session header, else
// an id found in the routing text, else the text itself (hashed when longer
// than 100 bytes).
func extractHashKey(text string, h http.Header) string {
	if h != nil {
		hdrs := vrRequestHeaders(h)
		for _, name := range sessionHeaderNames {
			if v := hdrs[name]; v != "" {
				return "header:" + name + ":" + v
			}
		}
	}
	if k, ok := hashKeyFromBody(text); ok {
		return k
	}
	if len(text) > 100 {
		return fmt.Sprintf("request_hash:%016x", fbiHash(text))
	}
	return "request:" + text
}

// hashKeyFromBody scans the routing text as if it were JSON, as the source
// does; a plain prompt such as "the user: bob" yields "user:bob".
func hashKeyFromBody(text string) (string, bool) {
	if text == "" {
		return "", false
	}
	if v, ok := nestedFieldValue(text, "session_params", "session_id"); ok {
		return "session:" + v, true
	}
	if v, ok := fieldValue(text, "user"); ok {
		return "user:" + v, true
	}
	if v, ok := fieldValue(text, "session_id"); ok {
		return "session:" + v, true
	}
	if v, ok := fieldValue(text, "user_id"); ok {
		return "user:" + v, true
	}
	return "", false
}

// colonAfter returns the byte offset of a ':' that follows only whitespace
// at the start of s.
func colonAfter(s string) (int, bool) {
	for i, r := range s {
		if r == ':' {
			return i, true
		}
		if !unicode.IsSpace(r) {
			return 0, false
		}
	}
	return 0, false
}

// fieldValue is extract_field_value: for each of "f", 'f' and bare f, the
// first occurrence only; a quoted value (possibly empty) or an unquoted one up
// to a delimiter.
func fieldValue(text, field string) (string, bool) {
	for _, pat := range []string{`"` + field + `"`, `'` + field + `'`, field} {
		pos := strings.Index(text, pat)
		if pos < 0 {
			continue
		}
		after := text[pos+len(pat):]
		c, ok := colonAfter(after)
		if !ok {
			continue
		}
		v := strings.TrimLeftFunc(after[c+1:], unicode.IsSpace)
		switch {
		case strings.HasPrefix(v, `"`):
			if end := strings.IndexByte(v[1:], '"'); end >= 0 {
				return v[1 : 1+end], true
			}
		case strings.HasPrefix(v, `'`):
			if end := strings.IndexByte(v[1:], '\''); end >= 0 {
				return v[1 : 1+end], true
			}
		default:
			end := strings.IndexAny(v, ", }]\n\r\t")
			if end < 0 {
				end = len(v)
			}
			if end > 0 {
				return v[:end], true
			}
		}
	}
	return "", false
}

// fieldStart is find_field_start: the offset just past the ':' of "f" or 'f'.
func fieldStart(text, field string) (int, bool) {
	for _, pat := range []string{`"` + field + `"`, `'` + field + `'`} {
		pos := strings.Index(text, pat)
		if pos < 0 {
			continue
		}
		if c, ok := colonAfter(text[pos+len(pat):]); ok {
			return pos + len(pat) + c + 1, true
		}
	}
	return 0, false
}

// jsonObject is extract_json_object: the brace-balanced prefix of s.
func jsonObject(s string) (string, bool) {
	if !strings.HasPrefix(s, "{") {
		return "", false
	}
	depth := 0
	for i, r := range s {
		switch r {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return s[:i+1], true
			}
		}
	}
	return "", false
}

func nestedFieldValue(text, parent, child string) (string, bool) {
	start, ok := fieldStart(text, parent)
	if !ok {
		return "", false
	}
	brace := strings.IndexByte(text[start:], '{')
	if brace < 0 {
		return "", false
	}
	obj, ok := jsonObject(text[start+brace:])
	if !ok {
		return "", false
	}
	return fieldValue(obj, child)
}
