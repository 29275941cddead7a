package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ClusterObjectSetKind is the kind of the ClusterObjectSet resource.
const ClusterObjectSetKind = "ClusterObjectSet"

// Limits of the API, enforced by the CRD schema and repeated by the validating webhook.
const (
	MaxPhases                  = 20
	MaxObjectsPerPhase         = 50
	MaxProbes                  = 20
	MaxAssertionsPerProbe      = 20
	MinProgressDeadlineMinutes = 10
	MaxProgressDeadlineMinutes = 720
)

// ClusterObjectSetSpec is the desired state of a ClusterObjectSet.
//
// revision, collisionProtection and phases form the content of the revision and are immutable;
// lifecycleState, progressDeadlineMinutes and progressionProbes may change.
//
// The rule on phases itself only runs when both the old and the new object have phases; the rule
// here also refuses an update that drops a non-empty phases list.
//
// +kubebuilder:validation:XValidation:rule="has(self.phases) || !has(oldSelf.phases) || size(oldSelf.phases) == 0",message="phases is immutable"
type ClusterObjectSetSpec struct {
	// lifecycleState is Active while the revision is rolled out and reconciled, and Archived once it is
	// retired: an archived revision lets go of its objects, deletes those no later revision took over,
	// and can never become Active again.
	//
	// +required
	// +kubebuilder:validation:Enum=Active;Archived
	// +kubebuilder:validation:XValidation:rule="oldSelf == 'Active' || oldSelf == 'Archived' && oldSelf == self",message="cannot un-archive"
	LifecycleState LifecycleState `json:"lifecycleState,omitempty"`

	// revision is the sequence number of this revision among those of the same owner, starting at 1.
	// It is immutable.
	//
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="revision is immutable"
	Revision int64 `json:"revision"`

	// phases are the ordered groups of objects of this revision. All objects of a phase are applied
	// together; the next phase starts only when every object of the current one passes its probes.
	// Phase names are unique. Once non-empty, the list is immutable (an empty list may be filled once).
	//
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:XValidation:rule="self == oldSelf || oldSelf.size() == 0",message="phases is immutable"
	Phases []ClusterObjectSetPhase `json:"phases,omitempty"`

	// progressDeadlineMinutes is how long, counted from creation, the rollout may take before
	// Progressing turns False with reason ProgressDeadlineExceeded. Unset means no deadline.
	//
	// +optional
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=720
	ProgressDeadlineMinutes int32 `json:"progressDeadlineMinutes,omitempty"`

	// progressionProbes are readiness checks beyond the built-in ones. Each probe applies to the objects
	// of every phase that its selector matches; a phase with no matching object passes the probe.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	ProgressionProbes []ProgressionProbe `json:"progressionProbes,omitempty"`

	// collisionProtection is the default policy for adopting objects that already exist. A phase or an
	// object may override it (object > phase > spec). It is immutable.
	//
	// +required
	// +kubebuilder:validation:Enum=Prevent;IfNoController;None
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="collisionProtection is immutable"
	CollisionProtection CollisionProtection `json:"collisionProtection,omitempty"`
}

// LifecycleState is the lifecycle state of a ClusterObjectSet.
type LifecycleState string

const (
	// LifecycleStateActive means the revision is rolled out and reconciled.
	LifecycleStateActive LifecycleState = "Active"
	// LifecycleStateArchived means the revision is retired; it never becomes Active again.
	LifecycleStateArchived LifecycleState = "Archived"
)

// CollisionProtection says which pre-existing objects a revision may adopt.
type CollisionProtection string

const (
	// CollisionProtectionPrevent adopts nothing: only objects this revision created are managed.
	CollisionProtectionPrevent CollisionProtection = "Prevent"
	// CollisionProtectionIfNoController adopts existing objects that no controller owns.
	CollisionProtectionIfNoController CollisionProtection = "IfNoController"
	// CollisionProtectionNone adopts any existing object, even one another controller owns.
	CollisionProtectionNone CollisionProtection = "None"
)

// ClusterObjectSetPhase is a named group of objects applied together.
type ClusterObjectSetPhase struct {
	// name identifies the phase: an RFC 1123 DNS label (lowercase alphanumerics and '-', starting and
	// ending with an alphanumeric, at most 63 characters), unique within the object set.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Label().validate(self).hasValue()",message="the value must consist of only lowercase alphanumeric characters and hyphens, and must start and end with an alphanumeric character."
	Name string `json:"name"`

	// objects are the objects of this phase, applied in no particular order.
	//
	// +required
	// +kubebuilder:validation:MaxItems=50
	Objects []ClusterObjectSetObject `json:"objects"`

	// collisionProtection overrides spec.collisionProtection for the objects of this phase.
	//
	// +optional
	// +kubebuilder:validation:Enum=Prevent;IfNoController;None
	CollisionProtection CollisionProtection `json:"collisionProtection,omitempty"`
}

// ClusterObjectSetObject is one object of a phase, given either inline or as a reference to a Secret
// that holds its serialized manifest. Exactly one of object and ref is set.
//
// +kubebuilder:validation:ExactlyOneOf=object;ref
type ClusterObjectSetObject struct {
	// object is the manifest itself: a Kubernetes object with apiVersion, kind and metadata.
	//
	// +optional
	// +kubebuilder:validation:EmbeddedResource
	// +kubebuilder:pruning:PreserveUnknownFields
	Object unstructured.Unstructured `json:"object,omitzero"`

	// ref points at a Secret key holding the manifest as JSON, or as gzip-compressed JSON.
	//
	// +optional
	Ref ObjectSourceRef `json:"ref,omitzero"`

	// collisionProtection overrides the phase's and the spec's policy for this object.
	//
	// +optional
	// +kubebuilder:validation:Enum=Prevent;IfNoController;None
	CollisionProtection CollisionProtection `json:"collisionProtection,omitempty"`
}

// ObjectSourceRef names a key of a Secret that holds a serialized object manifest.
type ObjectSourceRef struct {
	// name is the name of the Secret.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// namespace is the namespace of the Secret; empty means the system namespace of the reconciler.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`

	// key is the data key of the Secret that holds the manifest.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
}

// NamespaceOr returns the namespace of the referenced Secret: ref.namespace, or systemNamespace when
// it is empty.
func (r ObjectSourceRef) NamespaceOr(systemNamespace string) string {
	if r.Namespace == "" {
		return systemNamespace
	}
	return r.Namespace
}

// ProgressionProbe is a readiness check: assertions run against every object its selector matches.
type ProgressionProbe struct {
	// selector chooses the objects the assertions apply to.
	//
	// +required
	Selector ObjectSelector `json:"selector,omitzero"`

	// assertions must all hold for a selected object to count as ready.
	//
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	Assertions []Assertion `json:"assertions,omitempty"`
}

// SelectorType is the kind of an ObjectSelector.
// +enum
type SelectorType string

const (
	// SelectorTypeGroupKind selects objects by API group and kind.
	SelectorTypeGroupKind SelectorType = "GroupKind"
	// SelectorTypeLabel selects objects by a label selector.
	SelectorTypeLabel SelectorType = "Label"
)

// ObjectSelector is a union: type says which one of groupKind and label is set.
//
// +union
// +kubebuilder:validation:XValidation:rule="self.type == 'GroupKind' ? has(self.groupKind) : !has(self.groupKind)",message="groupKind is required when type is GroupKind, and forbidden otherwise"
// +kubebuilder:validation:XValidation:rule="self.type == 'Label' ? has(self.label) : !has(self.label)",message="label is required when type is Label, and forbidden otherwise"
type ObjectSelector struct {
	// type is GroupKind or Label.
	//
	// +required
	// +unionDiscriminator
	// +kubebuilder:validation:Enum=GroupKind;Label
	Type SelectorType `json:"type,omitempty"`

	// groupKind selects objects of this API group and kind. Set exactly when type is GroupKind.
	//
	// +optional
	// +unionMember
	GroupKind metav1.GroupKind `json:"groupKind,omitzero"`

	// label selects objects by labels. Set exactly when type is Label, with exactly one of
	// matchLabels and matchExpressions.
	//
	// +optional
	// +unionMember
	// +kubebuilder:validation:XValidation:rule="(has(self.matchExpressions) && !has(self.matchLabels)) || (!has(self.matchExpressions) && has(self.matchLabels))",message="exactly one of matchLabels or matchExpressions must be set"
	Label metav1.LabelSelector `json:"label,omitzero"`
}

// AssertionType is the kind of an Assertion.
// +enum
type AssertionType string

const (
	// AssertionTypeConditionEqual checks that a status condition has a given status.
	AssertionTypeConditionEqual AssertionType = "ConditionEqual"
	// AssertionTypeFieldsEqual checks that two fields hold equal values.
	AssertionTypeFieldsEqual AssertionType = "FieldsEqual"
	// AssertionTypeFieldValue checks that a field holds a given value.
	AssertionTypeFieldValue AssertionType = "FieldValue"
)

// Assertion is a union: type says which one of conditionEqual, fieldsEqual and fieldValue is set.
//
// +union
// +kubebuilder:validation:XValidation:rule="self.type == 'ConditionEqual' ? has(self.conditionEqual) : !has(self.conditionEqual)",message="conditionEqual is required when type is ConditionEqual, and forbidden otherwise"
// +kubebuilder:validation:XValidation:rule="self.type == 'FieldsEqual' ? has(self.fieldsEqual) : !has(self.fieldsEqual)",message="fieldsEqual is required when type is FieldsEqual, and forbidden otherwise"
// +kubebuilder:validation:XValidation:rule="self.type == 'FieldValue' ? has(self.fieldValue) : !has(self.fieldValue)",message="fieldValue is required when type is FieldValue, and forbidden otherwise"
type Assertion struct {
	// type is ConditionEqual, FieldsEqual or FieldValue.
	//
	// +required
	// +unionDiscriminator
	// +kubebuilder:validation:Enum=ConditionEqual;FieldsEqual;FieldValue
	Type AssertionType `json:"type,omitempty"`

	// conditionEqual holds when the object has a condition of this type with this status.
	//
	// +optional
	// +unionMember
	ConditionEqual ConditionEqualProbe `json:"conditionEqual,omitzero"`

	// fieldsEqual holds when both field paths exist and hold equal values.
	//
	// +optional
	// +unionMember
	FieldsEqual FieldsEqualProbe `json:"fieldsEqual,omitzero"`

	// fieldValue holds when the field path exists and holds the value.
	//
	// +optional
	// +unionMember
	FieldValue FieldValueProbe `json:"fieldValue,omitzero"`
}

// ConditionEqualProbe expects a status condition of a type to have a status.
type ConditionEqualProbe struct {
	// type is the condition type, e.g. Ready.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=200
	Type string `json:"type,omitempty"`

	// status is the expected status: True or False.
	//
	// +required
	// +kubebuilder:validation:Enum=True;False
	Status string `json:"status,omitempty"`
}

// FieldsEqualProbe expects two fields to hold equal values.
type FieldsEqualProbe struct {
	// fieldA is a dotted field path, e.g. spec.replicas.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=200
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-zA-Z0-9]+(?:\\\\.[a-zA-Z0-9]+)*$')",message="must contain a valid field path. valid fields contain upper or lower-case alphanumeric characters separated by the \".\" character."
	FieldA string `json:"fieldA,omitempty"`

	// fieldB is a dotted field path, e.g. status.readyReplicas.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=200
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-zA-Z0-9]+(?:\\\\.[a-zA-Z0-9]+)*$')",message="must contain a valid field path. valid fields contain upper or lower-case alphanumeric characters separated by the \".\" character."
	FieldB string `json:"fieldB,omitempty"`
}

// FieldValueProbe expects a field to hold a value.
type FieldValueProbe struct {
	// fieldPath is a dotted field path, e.g. status.phase.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=200
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-zA-Z0-9]+(?:\\\\.[a-zA-Z0-9]+)*$')",message="must contain a valid field path. valid fields contain upper or lower-case alphanumeric characters separated by the \".\" character."
	FieldPath string `json:"fieldPath,omitempty"`

	// value is the expected value, compared as a string, e.g. Bound.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=200
	Value string `json:"value,omitempty"`
}

// ClusterObjectSetStatus is the observed state of a ClusterObjectSet.
type ClusterObjectSetStatus struct {
	// conditions report the rollout: Progressing, Available and Succeeded. See the Condition* and
	// Reason* constants of this package for their meaning.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedPhases latch the digest of each phase's resolved content the first time it was resolved,
	// so content that changes behind a ref (a Secret deleted and recreated) is detected.
	//
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:XValidation:rule="oldSelf.size() == 0 || (self.size() == oldSelf.size() && oldSelf.all(o, self.exists(n, n.name == o.name)))",message="observedPhases: phases cannot be added or removed once set"
	ObservedPhases []ObservedPhase `json:"observedPhases,omitempty"`
}

// ObservedPhase is the latched digest of one phase's resolved content.
//
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.completedAt) || (has(self.completedAt) && self.completedAt == oldSelf.completedAt)",message="completedAt is immutable once set"
type ObservedPhase struct {
	// name is the name of a phase of spec.phases.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Label().validate(self).hasValue()",message="the value must consist of only lowercase alphanumeric characters and hyphens, and must start and end with an alphanumeric character."
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="name is immutable"
	Name string `json:"name"`

	// completedAt is when every object of the phase first passed its probes; never cleared.
	//
	// +optional
	CompletedAt metav1.Time `json:"completedAt,omitzero"`

	// digest is "<algorithm>:<hex>" over the phase's resolved objects.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]+:[a-f0-9]+$')",message="digest must be in the format '<algorithm>:<hex>'"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="digest is immutable"
	Digest string `json:"digest"`
}

// ClusterObjectSet is one immutable revision of a set of Kubernetes objects, grouped into phases that
// roll out in order. An object is managed by one revision at a time; ownership passes from a revision
// to the next, and older revisions are archived once the newest has succeeded.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=cos
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.spec.revision`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.spec.lifecycleState`
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=='Available')].status`
// +kubebuilder:printcolumn:name="Progressing",type=string,JSONPath=`.status.conditions[?(@.type=='Progressing')].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterObjectSet struct {
	metav1.TypeMeta `json:",inline"`

	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec ClusterObjectSetSpec `json:"spec,omitempty"`

	// +optional
	Status ClusterObjectSetStatus `json:"status,omitempty"`
}

// ClusterObjectSetList is a list of ClusterObjectSets.
//
// +kubebuilder:object:root=true
type ClusterObjectSetList struct {
	metav1.TypeMeta `json:",inline"`

	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []ClusterObjectSet `json:"items"`
}
