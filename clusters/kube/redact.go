package kube

import (
	"regexp"
	"strings"
)

// Redacted replaces every secret value in artifacts.
const Redacted = "[REDACTED]"

// credentialName matches names of variables and flags that carry secrets
// (HF_TOKEN, VLLM_API_KEY, AWS_SECRET_ACCESS_KEY, DB_PASSWORD, --api-key,
// Authorization) but not counts that merely mention tokens
// (--max-num-batched-tokens, MAX_TOKENS).
var credentialName = regexp.MustCompile(`(?i)(token($|[-_])|secret|passw(or)?d|api[-_]?key|access[-_]?key|private[-_]?key|credential|authorization|(^|[-_])key$)`)

// IsCredentialName reports whether an env var, flag or field name looks like
// it holds a credential.
func IsCredentialName(name string) bool {
	return credentialName.MatchString(strings.TrimLeft(name, "-"))
}

const secretWords = `(?:token|secret|password|passwd|api[-_]?key|apikey|access[-_]?key|private[-_]?key)`

var textRules = []struct {
	re   *regexp.Regexp
	repl string
}{
	// Authorization headers in any spelling: "Authorization: Bearer x",
	// "authorization": "x", authorization=x.
	{regexp.MustCompile(`(?i)(\bauthorization["']?[ \t]*[:=][ \t]*["']?)[^"'\r\n,}]+`), "${1}" + Redacted},
	// Bearer tokens wherever they appear.
	{regexp.MustCompile(`(?i)(\bbearer[ \t]+)[A-Za-z0-9._~+/=-]+`), "${1}" + Redacted},
	// NAME=value with a credential-looking upper-case name (env dumps, logs).
	{regexp.MustCompile(`\b([A-Z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|APIKEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIALS?|_KEY)(?:_[A-Z0-9_]*)?)=("[^"]*"|'[^']*'|[^\s"',]+)`), "${1}=" + Redacted},
	// --api-key=x, --api-key x, --hf-token x, --password x.
	{regexp.MustCompile(`(?i)(--(?:[a-z0-9]+-)*` + secretWords + `(?:-[a-z0-9-]+)?)(=|[ \t]+)("[^"]*"|'[^']*'|[^\s"',]+)`), "${1}${2}" + Redacted},
	// JSON/YAML keys: "api_key": "x", hf_token: x.
	{regexp.MustCompile(`(?i)(["']?\b[a-z0-9_.-]*` + secretWords + `["']?[ \t]*:[ \t]*)("[^"]*"|'[^']*'|[^\s,}\]]+)`), "${1}\"" + Redacted + "\""},
}

// RedactText removes secrets from free text (logs, YAML, metrics).
func RedactText(s string) string {
	for _, r := range textRules {
		s = r.re.ReplaceAllString(s, r.repl)
	}
	return s
}

// RedactObject walks a decoded JSON/YAML object in place and blanks every
// {name: <credential-looking>, value: ...} pair (Pod and role env), the
// argument after a credential flag in string lists (args, command,
// extraArgs), and map values under credential-looking keys.
func RedactObject(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if name, ok := x["name"].(string); ok && IsCredentialName(name) {
			if _, has := x["value"]; has {
				x["value"] = Redacted
			}
		}
		for k, val := range x {
			if s, ok := val.(string); ok && k != "name" && IsCredentialName(k) && s != "" && !isBenignKey(k) {
				x[k] = Redacted
				continue
			}
			x[k] = RedactObject(val)
		}
		return x
	case []any:
		for i := range x {
			s, ok := x[i].(string)
			if !ok {
				x[i] = RedactObject(x[i])
				continue
			}
			if flag, _, hasValue := strings.Cut(s, "="); strings.HasPrefix(s, "-") && IsCredentialName(flag) {
				if hasValue {
					x[i] = flag + "=" + Redacted
				} else if i+1 < len(x) {
					if _, ok := x[i+1].(string); ok {
						x[i+1] = Redacted
					}
				}
				continue
			}
			if i > 0 {
				if prev, ok := x[i-1].(string); ok && prev != "" && !strings.Contains(prev, "=") && strings.HasPrefix(prev, "-") && IsCredentialName(prev) {
					continue // already blanked as the flag's value
				}
			}
			x[i] = RedactText(s)
		}
		return x
	case string:
		return RedactText(x)
	}
	return v
}

// isBenignKey keeps fields whose names look like credentials but hold
// only references (the name of a Secret, the key inside it), so Pod
// descriptions stay readable.
func isBenignKey(k string) bool {
	switch k {
	case "secretName", "key", "secretKeyRef", "tokenExpirationSeconds":
		return true
	}
	return false
}
