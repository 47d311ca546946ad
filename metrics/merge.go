package metrics

import "fmt"

// Merge combines snapshots from several sources (every router Pod, every
// engine replica) into one. Each sample gets SourceLabel set to its part's
// single source, so series stay distinct and sums add the sources together.
// A part that is already merged (its samples carry SourceLabel) keeps its
// labels. The result's Time is the latest part's.
func Merge(parts ...Snapshot) (Snapshot, error) {
	out := Snapshot{Families: map[string]Family{}}
	seen := map[string]int{}
	for i, p := range parts {
		premerged := len(p.Samples) > 0 && hasSourceLabel(p.Samples)
		if !premerged && len(p.Sources) != 1 {
			return Snapshot{}, fmt.Errorf("metrics.Merge: part %d has sources %q; each part needs exactly one source name (metrics.Parse and Scrape set it)", i, p.Sources)
		}
		for _, src := range p.Sources {
			if j, dup := seen[src]; dup {
				return Snapshot{}, fmt.Errorf("metrics.Merge: source %q appears in parts %d and %d; scrape each source once", src, j, i)
			}
			seen[src] = i
			out.Sources = append(out.Sources, src)
		}
		if p.Time.After(out.Time) {
			out.Time = p.Time
		}
		for name, f := range p.Families {
			if _, ok := out.Families[name]; !ok {
				out.Families[name] = f
			}
		}
		for _, s := range p.Samples {
			if !premerged {
				s.Labels = with(s.Labels, SourceLabel, p.Sources[0])
			}
			out.Samples = append(out.Samples, s)
		}
	}
	sortSamples(out.Samples)
	return out, nil
}

func hasSourceLabel(samples []Sample) bool {
	for _, s := range samples {
		if _, ok := s.Labels[SourceLabel]; !ok {
			return false
		}
	}
	return true
}
