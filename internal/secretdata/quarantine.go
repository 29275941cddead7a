package secretdata

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// The orphan sweep keeps a copy of each object-data Secret it deletes for as long as an admitted
// create that references the Secret can still be stored (controllers.OrphanSweeper): a quarantine
// copy. It is of a type of its own and without the revision-name label, so no reader of
// object-data Secrets (OLM's, ours, the Secret guard, the manager's cache) ever takes it for one.
const (
	// QuarantineType is the type of a quarantine copy.
	QuarantineType corev1.SecretType = "cos-externalizer.io/quarantine"
	// LabelQuarantine marks a quarantine copy, for the sweep's list of them.
	LabelQuarantine = "cos-externalizer.io/quarantine"
	// The annotations of a quarantine copy: the deleted Secret's name, uid and labels, and the
	// digest of its data (DataDigest), which a restore verifies.
	AnnotationQuarantineOf     = "cos-externalizer.io/quarantine-of"
	AnnotationQuarantineUID    = "cos-externalizer.io/quarantine-uid"
	AnnotationQuarantineLabels = "cos-externalizer.io/quarantine-labels"
	AnnotationQuarantineDigest = "cos-externalizer.io/quarantine-digest"
)

// QuarantineName is the name of the quarantine copy of the Secret uid: one copy per Secret, whoever
// writes it, so that a sweep that died after writing it finds it again.
func QuarantineName(uid types.UID) string { return "cos-quarantine-" + string(uid) }

// DataDigest is the SHA-256 of a Secret's data, keys sorted, each key and value length-prefixed:
// equal digests mean byte-equal data.
func DataDigest(data map[string][]byte) string {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	h := sha256.New()
	for _, k := range keys {
		_, _ = fmt.Fprintf(h, "%d:%s%d:", len(k), k, len(data[k]))
		_, _ = h.Write(data[k])
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// Quarantine returns the quarantine copy of the object-data Secret sec (read with its data): in the
// same namespace, immutable, holding the same data and, in annotations, what a restore needs.
func Quarantine(sec *corev1.Secret) *corev1.Secret {
	labels, _ := json.Marshal(sec.Labels) // a map of strings always marshals
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      QuarantineName(sec.UID),
			Namespace: sec.Namespace,
			Labels:    map[string]string{LabelQuarantine: "true"},
			Annotations: map[string]string{
				AnnotationQuarantineOf:     sec.Name,
				AnnotationQuarantineUID:    string(sec.UID),
				AnnotationQuarantineLabels: string(labels),
				AnnotationQuarantineDigest: DataDigest(sec.Data),
			},
		},
		Type:      QuarantineType,
		Immutable: ptr.To(true),
		Data:      sec.Data,
	}
}

// QuarantineOf returns the key and uid of the Secret that the quarantine copy q (its metadata is
// enough) was made of, and false when q is not one.
func QuarantineOf(q metav1.Object) (types.NamespacedName, types.UID, bool) {
	name, uid := q.GetAnnotations()[AnnotationQuarantineOf], q.GetAnnotations()[AnnotationQuarantineUID]
	if name == "" || uid == "" || q.GetLabels()[LabelQuarantine] != "true" || q.GetName() != QuarantineName(types.UID(uid)) {
		return types.NamespacedName{}, "", false
	}
	return types.NamespacedName{Namespace: q.GetNamespace(), Name: name}, types.UID(uid), true
}

// SameQuarantine reports whether q, found under the name of sec's quarantine copy, is exactly that
// copy (a sweep that died after writing it, or an earlier look of this one).
func SameQuarantine(q, sec *corev1.Secret) bool {
	key, uid, ok := QuarantineOf(q)
	return ok && q.Type == QuarantineType && key.Name == sec.Name && uid == sec.UID &&
		q.Annotations[AnnotationQuarantineDigest] == DataDigest(sec.Data) && DataDigest(q.Data) == DataDigest(sec.Data)
}

// Restored returns the object-data Secret to create again from the quarantine copy q: the same name,
// labels and data, of the object-data type, immutable, without owners (Secret ownership adds its
// users). It fails, naming no content, when q is not a quarantine copy or its data is not what was
// copied.
func Restored(q *corev1.Secret) (*corev1.Secret, error) {
	key, _, ok := QuarantineOf(q)
	if !ok || q.Type != QuarantineType {
		return nil, fmt.Errorf("secret %s/%s is not a quarantine copy", q.Namespace, q.Name)
	}
	if DataDigest(q.Data) != q.Annotations[AnnotationQuarantineDigest] {
		return nil, fmt.Errorf("quarantine copy %s/%s of Secret %s: its data does not match the digest taken when it was copied", q.Namespace, q.Name, key.Name)
	}
	var labels map[string]string
	if err := json.Unmarshal([]byte(q.Annotations[AnnotationQuarantineLabels]), &labels); err != nil {
		return nil, fmt.Errorf("quarantine copy %s/%s of Secret %s: reading its labels: %w", q.Namespace, q.Name, key.Name, err)
	}
	if labels[olmv1.LabelRevisionName] == "" {
		return nil, fmt.Errorf("quarantine copy %s/%s of Secret %s: no %s label to restore", q.Namespace, q.Name, key.Name, olmv1.LabelRevisionName)
	}
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, Labels: labels},
		Type:       olmv1.SecretTypeObjectData,
		Immutable:  ptr.To(true),
		Data:       q.Data,
	}, nil
}
