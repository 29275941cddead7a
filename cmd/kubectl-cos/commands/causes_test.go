package commands

import (
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

func TestAPICause(t *testing.T) {
	const secret = "s3cr3t-value"
	deployments := schema.GroupResource{Group: "apps", Resource: "deployments"}
	deployment := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	status := func(s metav1.Status) error { return &apierrors.StatusError{ErrStatus: s} }
	tests := map[string]struct {
		err  error
		want string
	}{
		"namespace not found": {apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "argocd"),
			`NotFound (404): namespaces "argocd" not found`},
		"already exists": {apierrors.NewAlreadyExists(deployments, "d"), `AlreadyExists (409): deployments.apps "d" already exists`},
		"namespace terminating": {status(metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonForbidden, Code: 403,
			Message: `deployments.apps "d" is forbidden: unable to create new content in namespace argocd because it is being terminated`,
			Details: &metav1.StatusDetails{Name: "d", Group: "apps", Kind: "deployments"}}),
			`Forbidden (403): deployments.apps "d" is forbidden: unable to create new content in namespace argocd because it is being terminated`},
		"RBAC": {status(metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonForbidden, Code: 403,
			Message: `deployments.apps "d" is forbidden: User "alice" cannot patch resource "deployments" in API group "apps" in the namespace "argocd"`,
			Details: &metav1.StatusDetails{Name: "d", Group: "apps", Kind: "deployments"}}),
			`Forbidden (403): deployments.apps "d" is forbidden: User "alice" cannot patch resource "deployments" in API group "apps" in the namespace "argocd"`},
		"a webhook's denial may quote content": {status(metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonForbidden, Code: 403,
			Message: `admission webhook "policy.example.com" denied the request: env FOO=` + secret,
			Details: &metav1.StatusDetails{Name: "d", Group: "apps", Kind: "deployments"}}),
			`Forbidden (403): deployments.apps "d"`},
		"invalid: fields and types, no values": {apierrors.NewInvalid(deployment, "d", field.ErrorList{
			field.Invalid(field.NewPath("spec", "template", "spec", "containers").Index(0).Child("env").Index(0).Child("value"), secret, "must be short")}),
			`Invalid (422): spec.template.spec.containers[0].env[0].value: FieldValueInvalid`},
		"a NotFound message that is not the names'": {status(metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: 404,
			Message: "not found: " + secret, Details: &metav1.StatusDetails{Name: "x", Kind: "things"}}),
			`NotFound (404): things "x"`},
		"conflict": {apierrors.NewConflict(deployments, "d", errors.New(secret)), `Conflict (409): deployments.apps "d"`},
		"internal": {apierrors.NewInternalError(errors.New(secret)), `InternalError (500)`},
		"timeout":  {apierrors.NewTimeoutError(secret, 1), `Timeout (504)`},
		"kind not served": {&apimeta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "example.com", Kind: "Widget"}, SearchedVersions: []string{"v1"}},
			`not served: no matches for kind "Widget" in version "example.com/v1"`},
		"not an API error": {errors.New("dial tcp: connection refused"), "the request failed: dial tcp: connection refused"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := apiCause(tc.err)
			if got != tc.want {
				t.Errorf("apiCause = %q, want %q", got, tc.want)
			}
			if strings.Contains(got, secret) {
				t.Errorf("apiCause shows content: %q", got)
			}
		})
	}
}

func TestRefusedAndCurrentPhase(t *testing.T) {
	done := metav1.NewTime(time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC))
	cos := func(reason, msg string, observed ...olmv1.ObservedPhase) *olmv1.ClusterObjectSet {
		c := &olmv1.ClusterObjectSet{Spec: olmv1.ClusterObjectSetSpec{Phases: []olmv1.ClusterObjectSetPhase{{Name: "namespaces"}, {Name: "deploy"}}}}
		c.Status.ObservedPhases = observed
		if reason != "" {
			c.Status.Conditions = []metav1.Condition{{Type: olmv1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: reason, Message: msg}}
		}
		return c
	}
	const refusedMsg = "reconciling object: reconciling apps/v1, Kind=Deployment argocd/d: the API server refused it: NotFound (404)"
	tests := map[string]struct {
		c       *olmv1.ClusterObjectSet
		refused bool
		current int
	}{
		"refused in the first phase":   {cos(olmv1.ReasonRetrying, refusedMsg), true, 0},
		"refused in the second phase":  {cos(olmv1.ReasonRetrying, refusedMsg, olmv1.ObservedPhase{Name: "namespaces", CompletedAt: done}), true, 1},
		"a collision is not a refusal": {cos(olmv1.ReasonRetrying, "revision object collisions in phase 1"), false, 0},
		"rolling out":                  {cos("RollingOut", ""), false, 0},
		"no condition":                 {cos("", ""), false, 0},
		"all done": {cos("Succeeded", "", olmv1.ObservedPhase{Name: "namespaces", CompletedAt: done}, olmv1.ObservedPhase{Name: "deploy", CompletedAt: done}),
			false, -1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := refused(tc.c); got != tc.refused {
				t.Errorf("refused = %v", got)
			}
			if got := currentPhase(tc.c); got != tc.current {
				t.Errorf("currentPhase = %d, want %d", got, tc.current)
			}
		})
	}
}
