package admission

import (
	"bytes"
	"encoding/json"
	"fmt"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// LastAppliedAnnotation is where client-side kubectl apply keeps the applied object.
const LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// RewriteLastApplied returns kubectl's last-applied annotation value with its spec.phases replaced
// by phases, so that the annotation holds the stored (externalized) form. The result is
// deterministic: the same inputs always give the same bytes.
func RewriteLastApplied(value string, phases []olmv1.ClusterObjectSetPhase) (string, error) {
	var applied map[string]any
	if err := json.Unmarshal([]byte(value), &applied); err != nil {
		return "", fmt.Errorf("the %s annotation is not a JSON object: %w", LastAppliedAnnotation, err)
	}
	spec, ok := applied["spec"].(map[string]any)
	if !ok {
		return value, nil
	}
	b, err := json.Marshal(phases)
	if err != nil {
		return "", err
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		return "", err
	}
	spec["phases"] = generic
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(applied); err != nil {
		return "", err
	}
	// kubectl ends the annotation with a newline, as Encode does.
	return buf.String(), nil
}
