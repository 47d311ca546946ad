package api

import "fmt"

// AdmissionError is a refusal of a ModelDeployment write by the API server's
// admission (the CRD schema or the operator's validating webhook): the
// offending field path and the API server's text after it. The sim's
// operator returns it and every target hands it to the specs
// (clusters.AdmissionError), so it is defined here, where both may import it.
type AdmissionError struct {
	// Field is the offending field path, e.g. spec.router.extraArgs[2].
	Field string
	// Message is the refusal after the field path, verbatim.
	Message string
}

func (e *AdmissionError) Error() string {
	if e.Field == "" {
		return "admission refused: " + e.Message
	}
	return fmt.Sprintf("admission refused: %s: %s", e.Field, e.Message)
}
