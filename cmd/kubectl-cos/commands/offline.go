package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
	cosadmission "github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

// errOffline answers the pipeline's reads of Secrets offline: a Secret that cannot be read is not
// warned about.
var errOffline = errors.New("build is offline: the cluster is not read")

// offlineStore is the admission pipeline's Store for build --externalize: no ClusterObjectSet is
// stored, no Secret can be read, and the planned Secrets are kept to be printed, as Write would
// create them (secretdata.ObjectDataSecret).
type offlineStore struct {
	namespace string
	secrets   []*corev1.Secret
}

func (s *offlineStore) GetClusterObjectSet(_ context.Context, name string) (*olmv1.ClusterObjectSet, error) {
	return nil, apierrors.NewNotFound(cosGVR.GroupResource(), name)
}

func (s *offlineStore) GetSecret(context.Context, types.NamespacedName) (*corev1.Secret, error) {
	return nil, errOffline
}

func (s *offlineStore) Write(_ context.Context, cosName string, plan *content.Plan, _ bool) (int, error) {
	for _, sec := range plan.Secrets {
		s.secrets = append(s.secrets, secretdata.ObjectDataSecret(cosName, s.namespace, sec))
	}
	return len(plan.Secrets), nil
}

// Touch writes nothing offline: the cluster is not read, so no Secret is touched.
func (s *offlineStore) Touch(_ context.Context, keys []types.NamespacedName) ([]types.NamespacedName, error) {
	return keys, nil
}

// externalizeOffline runs the webhook's admission pipeline on c as the create the API server would
// send it, and returns the object-data Secrets it would write and c with refs in their place (c
// inline when the policy keeps it so), the refs into systemNamespace, with the note to print.
func externalizeOffline(c *olmv1.ClusterObjectSet, mode cosadmission.Mode, threshold int, systemNamespace string) ([]*unstructured.Unstructured, string, error) {
	u, err := toUnstructured(c)
	if err != nil {
		return nil, "", err
	}
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return nil, "", err
	}
	obj, specSize, err := cosadmission.DecodeCOS(raw)
	if err != nil {
		return nil, "", err
	}
	store := &offlineStore{namespace: systemNamespace}
	p := &cosadmission.Pipeline{Store: store, SystemNamespace: systemNamespace, Mode: mode, Threshold: threshold}
	r := p.Admit(context.Background(), cosadmission.Request{Operation: cosadmission.Create, New: obj, SpecSize: specSize})
	if r.Refusal != nil {
		if len(r.Refusal.Errs) > 0 {
			return nil, "", r.Refusal.Errs.ToAggregate()
		}
		return nil, "", r.Refusal.Err
	}
	obj.Spec.Phases = r.Phases
	var out []*unstructured.Unstructured
	for _, s := range store.secrets {
		su, err := toUnstructured(s)
		if err != nil {
			return nil, "", err
		}
		out = append(out, su)
	}
	cu, err := toUnstructured(obj)
	if err != nil {
		return nil, "", err
	}
	note := fmt.Sprintf("%s: kept inline: %s", obj.Name, r.Stats.Decision.Reason)
	if r.Stats.Plan.Secrets > 0 {
		note = fmt.Sprintf("%s: %s", obj.Name, r.Stats.Summary(systemNamespace, "offline: nothing written"))
	}
	return append(out, cu), note, nil
}
