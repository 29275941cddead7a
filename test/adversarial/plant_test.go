package adversarial_test

// Secrets planted where a caller may not read: one in another namespace and one in the system
// namespace of another type (Opaque), holding a marker under a key with a marker, of a length of its
// own. No answer, warning, condition, Event or log line may carry the marker, the key or the length.

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/kube/scheme"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

const (
	plantMark   = "PLANTMARK-"
	plantKey    = "PLANTKEY-value"
	plantLength = 31337
	// mallory may create and read ClusterObjectSets, and nothing else: no Secret anywhere.
	mallory = "adv-mallory"
)

// plantLengthRE finds the planted value's length as a number of its own.
var plantLengthRE = regexp.MustCompile(fmt.Sprintf(`\b%d\b`, plantLength))

// planted names the planted Secrets and holds a client and its warnings for mallory.
type planted struct {
	foreign, opaque types.NamespacedName
	absent          types.NamespacedName // a Secret that does not exist, beside foreign
	mallory         client.Client
	warnings        *testenv.Warnings
}

// plantSecrets writes the planted Secrets of run m and mallory's permissions.
func plantSecrets(ctx context.Context, m *model) (*planted, error) {
	p := &planted{
		foreign: types.NamespacedName{Namespace: m.cmNamespace(), Name: "plant"},
		opaque:  types.NamespacedName{Namespace: testenv.SystemNamespace, Name: m.run + "-plant"},
		absent:  types.NamespacedName{Namespace: m.cmNamespace(), Name: "absent"},
	}
	value := []byte(plantMark + strings.Repeat("x", plantLength-len(plantMark)))
	for _, key := range []types.NamespacedName{p.foreign, p.opaque} {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
			// The system namespace's one carries the revision label, as a user's mistake might.
			Labels: map[string]string{olmv1.LabelRevisionName: m.run + "-plant"}},
			Type: corev1.SecretTypeOpaque, Data: map[string][]byte{plantKey: value}}
		if err := testenv.Env.Client.Create(ctx, sec); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: mallory}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{olmv1.GroupVersion.Group}, Resources: []string{"clusterobjectsets"},
		Verbs: []string{"get", "list", "watch", "create", "update", "delete"},
	}}}
	if err := testenv.Env.Client.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: mallory},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: mallory},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: mallory}}}
	if err := testenv.Env.Client.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	cfg := rest.CopyConfig(testenv.Env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: mallory}
	p.warnings = &testenv.Warnings{}
	cfg.WarningHandler = p.warnings
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	p.mallory = c
	return p, nil
}

// leak says what of the planted Secrets text carries ("" when nothing).
func (p *planted) leak(text string) string {
	switch {
	case strings.Contains(text, plantMark):
		return "the planted value"
	case strings.Contains(text, plantKey):
		return "the planted key"
	case plantLengthRE.MatchString(text):
		return "the planted value's length"
	}
	return ""
}

// checkNoPlantLeak: no log line of the manager carried the planted marker or key.
func (r *runner) checkNoPlantLeak() error {
	if line := r.env.plantLeakLine(); line != "" {
		return violated("secret-leaked", "a log line carries a planted Secret's marker or key (up to it): %s", line)
	}
	return nil
}

// checkPlantInStatus: no condition of the run's ClusterObjectSets and no Event carries anything of
// the planted Secrets.
func (r *runner) checkPlantInStatus(ctx context.Context) error {
	sets, err := r.runSets(ctx)
	if err != nil {
		return err
	}
	for _, s := range sets {
		for _, c := range s.Status.Conditions {
			if what := r.plant.leak(c.Message); what != "" {
				return violated("secret-leaked", "condition %s of %s carries %s", c.Type, s.Name, what)
			}
		}
	}
	events := &corev1.EventList{}
	if err := r.admin.List(ctx, events); err != nil {
		return err
	}
	for _, ev := range events.Items {
		if what := r.plant.leak(ev.Message); what != "" {
			return violated("secret-leaked", "Event %s/%s carries %s", ev.Namespace, ev.Name, what)
		}
	}
	return nil
}
