package config

import (
	"github.com/gpustack/routing-conformance/internal/yamlbind"

	"encoding/json"
	"fmt"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written as a Go duration string ("30s", "2m").
// A bare number is refused: "30" could mean seconds or nanoseconds.
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes the duration as its string form, as it is read.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads the string form.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("expected a duration string such as \"30s\": %w", err)
	}
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// DecodeYAMLNode implements yamlbind.NodeDecoder.
func (d *Duration) DecodeYAMLNode(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		return fmt.Errorf("expected a duration such as \"30s\" or \"2m\", got %s", yamlbind.Describe(n))
	}
	v, err := parseDuration(n.Value)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

func parseDuration(s string) (Duration, error) {
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("expected a duration such as \"30s\" or \"2m\", got %q", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("must not be negative, got %q", s)
	}
	return Duration(v), nil
}

// Interval is how long a wait may take and how often it polls, written as a
// two-element list: [timeout, poll], e.g. ["10m", "10s"].
type Interval struct {
	Timeout Duration `json:"timeout"`
	Poll    Duration `json:"poll"`
}

// Args returns (timeout, poll) in the order Gomega's Eventually(...).
// WithTimeout/WithPolling and Eventually(f, timeout, poll) take them.
func (i Interval) Args() []any { return []any{i.Timeout.D(), i.Poll.D()} }

func (i Interval) String() string { return fmt.Sprintf("[%s, %s]", i.Timeout, i.Poll) }

// MarshalJSON writes the same two-element form the file uses.
func (i Interval) MarshalJSON() ([]byte, error) {
	return json.Marshal([]string{i.Timeout.String(), i.Poll.String()})
}

// UnmarshalJSON reads the two-element form.
func (i *Interval) UnmarshalJSON(b []byte) error {
	var pair []Duration
	if err := json.Unmarshal(b, &pair); err != nil {
		return err
	}
	if len(pair) != 2 {
		return fmt.Errorf("expected [timeout, poll], got %d values", len(pair))
	}
	i.Timeout, i.Poll = pair[0], pair[1]
	return nil
}

// DecodeYAMLNode implements yamlbind.NodeDecoder.
func (i *Interval) DecodeYAMLNode(n *yaml.Node) error {
	if n.Kind != yaml.SequenceNode || len(n.Content) != 2 {
		return fmt.Errorf("expected [timeout, poll] such as [\"10m\", \"10s\"], got %s", yamlbind.Describe(n))
	}
	var out Interval
	if err := out.Timeout.DecodeYAMLNode(n.Content[0]); err != nil {
		return fmt.Errorf("timeout: %w", err)
	}
	if err := out.Poll.DecodeYAMLNode(n.Content[1]); err != nil {
		return fmt.Errorf("poll: %w", err)
	}
	*i = out
	return nil
}
