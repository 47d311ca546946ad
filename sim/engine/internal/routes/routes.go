// Package routes holds an engine's route table as read from the real
// server's source: every route the FastAPI app registers, with its methods,
// the condition under which it is registered, and whether the sim's
// emulation serves it. The engines dispatch through their table, so a
// request for a path the real server lacks gets Starlette's 404 and a wrong
// method its 405, as on the real server; docs/engines.md shows the tables as
// Markdown renders them.
package routes

import (
	"slices"
	"strings"
)

// Route is one route of the real server.
type Route struct {
	// Path is the route's path as declared; "{name}" matches one path
	// segment, "{name:path}" the rest of the path. For a Mount it is the
	// prefix.
	Path string
	// Methods the route takes (a GET route takes HEAD too, as Starlette
	// adds it). Nil for a Mount, which takes every method.
	Methods []string
	// Mount is a Starlette Mount whose path regex is ^Path(.*)$ (vLLM and
	// SGLang mount /metrics this way), so /metricsX reaches it too.
	Mount bool
	// When is the condition under which the real server registers the
	// route; "" means on every launch of a generative model.
	When string
	// OnByDefault marks a conditional route whose condition holds on a
	// default launch (FastAPI's documentation routes).
	OnByDefault bool
	// Served is whether the sim's emulation answers the route. A route the
	// real server registers by default but the sim does not serve is
	// answered 501 (see the engine's Unserved); one registered only under a
	// condition the sim does not emulate is answered as a default launch
	// would, 404.
	Served bool
	// Use says who calls the route on the sim (routers, the EPP, the
	// operator's probes, the suite, common clients).
	Use string
	// Source is the file, in the upstream tree, that declares the route.
	Source string
}

// Table is one engine's routes.
type Table struct {
	// Engine names the server and version ("vLLM 0.29.0").
	Engine string
	// Repo and Ref locate the source read: owner/name and the commit (or
	// the release tag where the release records no commit).
	Repo, Ref string
	// Read says where the source was read from.
	Read   string
	Routes []Route
}

// Match is what a request's method and path meet in the table, as
// Starlette's router decides it: the first route whose path and method
// match, else the first whose path matches (a 405), else nothing (a 404).
type Match struct {
	Route *Route
	// MethodOK is false when only the path matched.
	MethodOK bool
}

// Find returns the route for method and path; Route is nil when no route's
// path matches.
func (t *Table) Find(method, path string) Match {
	var partial *Route
	for i := range t.Routes {
		r := &t.Routes[i]
		if !r.matchPath(path) {
			continue
		}
		if r.allows(method) {
			return Match{Route: r, MethodOK: true}
		}
		if partial == nil {
			partial = r
		}
	}
	return Match{Route: partial}
}

// Allow is the Allow header of a 405: the route's methods, HEAD after GET.
func (r *Route) Allow() string { return strings.Join(r.methods(), ", ") }

func (r *Route) methods() []string {
	out := slices.Clone(r.Methods)
	if slices.Contains(out, "GET") && !slices.Contains(out, "HEAD") {
		i := slices.Index(out, "GET")
		out = slices.Insert(out, i+1, "HEAD")
	}
	return out
}

func (r *Route) allows(method string) bool {
	return r.Mount || slices.Contains(r.methods(), method)
}

func (r *Route) matchPath(path string) bool {
	if r.Mount {
		return strings.HasPrefix(path, r.Path)
	}
	pat := r.Path
	for {
		i := strings.IndexByte(pat, '{')
		if i < 0 {
			return pat == path
		}
		if !strings.HasPrefix(path, pat[:i]) {
			return false
		}
		j := strings.IndexByte(pat[i:], '}')
		if j < 0 {
			return false
		}
		param, rest := pat[i+1:i+j], pat[i+j+1:]
		path = path[i:]
		if strings.HasSuffix(param, ":path") {
			// Starlette's path convertor is ".*": the rest of the path,
			// possibly empty, then the literal that follows.
			return strings.HasSuffix(path, rest)
		}
		k := strings.IndexByte(path, '/')
		if k < 0 {
			k = len(path)
		}
		if k == 0 {
			return false
		}
		path, pat = path[k:], rest
	}
}

// Default reports whether a default launch registers the route.
func (r *Route) Default() bool { return r.When == "" || r.OnByDefault }

// Served returns the paths of the routes the emulation serves.
func (t *Table) Served() []string {
	var out []string
	for _, r := range t.Routes {
		if r.Served {
			out = append(out, r.Path)
		}
	}
	return out
}

// Markdown renders the table for docs/engines.md.
func (t *Table) Markdown() string {
	var b strings.Builder
	b.WriteString(t.Engine + ", read from " + t.Read + ".\n\n")
	b.WriteString("| Methods | Path | Registered | Sim | Used by | Declared in |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- |\n")
	for _, r := range t.Routes {
		methods := strings.Join(r.Methods, ", ")
		path := "`" + r.Path + "`"
		if r.Mount {
			methods = "any"
			path = "`" + r.Path + "*` (mount)"
		}
		when := "always"
		if r.When != "" {
			when = r.When
		}
		sim := "404 (not registered by default)"
		switch {
		case r.Served:
			sim = "**served**"
		case r.Default():
			sim = "501 (not emulated)"
		}
		use := r.Use
		if use == "" {
			use = "-"
		}
		b.WriteString("| " + methods + " | " + path + " | " + esc(when) + " | " + sim + " | " + esc(use) + " | " + t.Repo + "@" + t.Ref + ":" + r.Source + " |\n")
	}
	return b.String()
}

func esc(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
