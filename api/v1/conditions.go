package v1

// Condition types of ClusterObjectSet status.
const (
	// ConditionProgressing says whether the revision is still rolling out.
	ConditionProgressing = "Progressing"
	// ConditionAvailable says whether every object passes its readiness probes.
	ConditionAvailable = "Available"
	// ConditionSucceeded turns True once the rollout has completed, and is never cleared.
	ConditionSucceeded = "Succeeded"
)

// Condition reasons. Which reasons go with which condition and status:
//
//	Progressing True:    RollingOut, Retrying, Succeeded
//	Progressing False:   Blocked, Archived, ProgressDeadlineExceeded
//	Available True:      ProbesSucceeded
//	Available False:     ProbeFailure
//	Available Unknown:   Reconciling, Archived
//	Succeeded True:      Succeeded
const (
	// ReasonRollingOut: phases are being applied and are making progress.
	ReasonRollingOut = "RollingOut"
	// ReasonRetrying: an error that may resolve itself on a later attempt (a missing Secret, a collision).
	ReasonRetrying = "Retrying"
	// ReasonSucceeded: every phase is applied and ready.
	ReasonSucceeded = "Succeeded"
	// ReasonBlocked: an error that needs a person (content behind a ref changed or is corrupt).
	ReasonBlocked = "Blocked"
	// ReasonArchived: the revision is archived and no longer reconciled.
	ReasonArchived = "Archived"
	// ReasonProgressDeadlineExceeded: the rollout did not succeed within spec.progressDeadlineMinutes.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	// ReasonProbesSucceeded: every object passes its readiness probes.
	ReasonProbesSucceeded = "ProbesSucceeded"
	// ReasonProbeFailure: at least one object fails a readiness probe.
	ReasonProbeFailure = "ProbeFailure"
	// ReasonReconciling: an error kept the probes from being observed.
	ReasonReconciling = "Reconciling"
)

// Well-known labels, annotations and types.
const (
	// LabelOwnerKind is the kind of the object (e.g. ClusterExtension) that produced a ClusterObjectSet.
	LabelOwnerKind = "olm.operatorframework.io/owner-kind"
	// LabelOwnerName is the name of the object that produced a ClusterObjectSet; revisions with the same
	// owner name hand objects over to each other.
	LabelOwnerName = "olm.operatorframework.io/owner-name"
	// LabelPackageName is the package a ClusterObjectSet installs.
	LabelPackageName = "olm.operatorframework.io/package-name"
	// LabelBundleVersion is the bundle version a ClusterObjectSet installs.
	LabelBundleVersion = "olm.operatorframework.io/bundle-version"
	// AnnotationBundleVersion is the annotation (same key as the label) OLM's ClusterExtension applier
	// writes on a ClusterObjectSet with the bundle version it installs; the Progressing messages name it
	// ("Revision 1.0.2 is rolling out."), as upstream's do.
	AnnotationBundleVersion = "olm.operatorframework.io/bundle-version"
	// LabelRevisionName is set on object-data Secrets (and managed objects) to the name of the
	// ClusterObjectSet they belong to.
	LabelRevisionName = "olm.operatorframework.io/revision-name"
	// LabelOwningRevision marks a managed object with the revision that controls it (the value is
	// the revision-name label value of the ClusterObjectSet's name). The manager caches only objects
	// carrying it.
	LabelOwningRevision = "olm.operatorframework.io/owning-revision"

	// SecretTypeObjectData is the type of Secrets holding externalized object manifests.
	SecretTypeObjectData = "olm.operatorframework.io/object-data"

	// DefaultSystemNamespace is where object-data Secrets live unless configured otherwise, and what an
	// empty ref.namespace means.
	DefaultSystemNamespace = "olmv1-system"

	// LeaderElectionLease is the Lease, in the manager's namespace, whose holder is the manager that
	// leads: the one that rolls ClusterObjectSets out.
	LeaderElectionLease = "cos-externalizer.olm.operatorframework.io"
)
