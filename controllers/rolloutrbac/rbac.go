// Package rolloutrbac holds the one permission that only a manager rolling ClusterObjectSets out
// needs: the objects a ClusterObjectSet manages can be of any kind, so it may do anything to
// anything. `make manifests` generates it into a ClusterRole of its own, cos-externalizer-rollout
// (config/rbac/rollout), which the overlays that roll out bind (config/default, config/self-signed)
// and config/webhook-only, where OLM's operator-controller rolls out, does not.
//
// The package holds no code; it exists so that controller-gen reads this marker apart from the
// manager's other rules.
package rolloutrbac

// +kubebuilder:rbac:groups=*,resources=*,verbs=*
