package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gpustack/routing-conformance/api"
)

// acceptedAPIVersions are the versions a ModelDeployment is served under
// (docs/operator.md#api-identity): the stored v1alpha1 and the aggregated v1 view.
var acceptedAPIVersions = []string{api.APIVersion, api.Group + "/v1"}

// decodeModelDeployment reads one ModelDeployment from YAML or JSON,
// strictly: an unknown field anywhere is an error naming its path and the
// fields accepted there, and the object must be kind ModelDeployment of
// worker.gpustack.ai.
func decodeModelDeployment(data []byte) (*api.ModelDeployment, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("the file is empty; expected one ModelDeployment")
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	var raw any
	if err := json.Unmarshal(js, &raw); err != nil {
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	obj, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("expected a ModelDeployment object at the top level, got %s", kindOf(raw))
	}
	av, _ := obj["apiVersion"].(string)
	if !slices.Contains(acceptedAPIVersions, av) {
		return nil, fmt.Errorf("apiVersion: %q is not accepted; accepted values: %s", av,
			strings.Join(acceptedAPIVersions, ", "))
	}
	if k, _ := obj["kind"].(string); k != api.Kind {
		return nil, fmt.Errorf("kind: %q is not accepted; accepted values: %s", k, api.Kind)
	}
	if err := checkFields("", raw, reflect.TypeOf(api.ModelDeployment{})); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	md := new(api.ModelDeployment)
	if err := dec.Decode(md); err != nil {
		return nil, fmt.Errorf("decode ModelDeployment: %w", err)
	}
	return md, nil
}

// checkFields walks a decoded JSON value against the Go type it will be
// decoded into and reports the first field the type does not have.
func checkFields(path string, v any, t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			if v == nil {
				return nil
			}
			return fmt.Errorf("%s: expected an object, got %s", orTop(path), kindOf(v))
		}
		fields := jsonFields(t)
		for _, key := range slices.Sorted(maps.Keys(m)) {
			f, known := fields[key]
			if !known {
				return fmt.Errorf("%s: unknown field %q; accepted fields: %s", orTop(path), key,
					strings.Join(slices.Sorted(maps.Keys(fields)), ", "))
			}
			if err := checkFields(join(path, key), m[key], f.Type); err != nil {
				return err
			}
		}
	case reflect.Slice:
		s, ok := v.([]any)
		if !ok {
			if v == nil {
				return nil
			}
			return fmt.Errorf("%s: expected a list, got %s", orTop(path), kindOf(v))
		}
		for i, e := range s {
			if err := checkFields(fmt.Sprintf("%s[%d]", path, i), e, t.Elem()); err != nil {
				return err
			}
		}
	case reflect.Map:
		if _, ok := v.(map[string]any); !ok && v != nil {
			return fmt.Errorf("%s: expected a map, got %s", orTop(path), kindOf(v))
		}
	}
	return nil
}

func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orTop(path string) string {
	if path == "" {
		return "(top level)"
	}
	return path
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}
