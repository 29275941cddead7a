package adversarial_test

// collector-race: the sweep race of sweep-race with the garbage collector as the deleter. A
// ClusterObjectSet deleted with background propagation leaves its Secrets to the collector, which
// is not exempt from the Secret guard; the guard admits each delete once its live read finds no user
// of the Secret, and writes the Secret's quarantine copy first (objectdata.KeepCopy). A refs-only
// create that lands between that read and the delete, where no live read can see it, must keep its
// content: the sweep's restore creates the Secrets again from the guard's copies (issue 35).

import (
	"context"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// opCollectorRace: revision From is deleted with background propagation; when the Secret guard is
// about to admit the collector's delete of one of its Secrets (its hook, after its live read found
// no user and its copy was written), revision Rev is created by OLM's operator-controller (no
// check-refs call: untouched) with From's stored refs before the guard answers. Every Secret Rev
// references must exist again, with its content, once the delete has had its answer.
const opCollectorRace = "collector-race"

// ownedBound is how long collector-race waits for Secret ownership to make From the owner of its
// Secrets before it deletes From (the collector takes only what a deleted set owned).
const ownedBound = 30 * time.Second

// beforeGuardDelete is every replica's app.Options.GuardBeforeAdmitDelete: it springs the armed
// guard traps that name secret, and returns once they have run (the guard answers after).
func (h *harness) beforeGuardDelete(_ context.Context, secret types.NamespacedName) {
	h.mu.Lock()
	var due []*sweepTrap
	for t := range h.traps {
		if t.guard && t.keys[secret] {
			t.started = true
			delete(h.traps, t)
			due = append(due, t)
		}
	}
	h.mu.Unlock()
	for _, t := range due {
		t.spring([]corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Namespace: secret.Namespace, Name: secret.Name}}})
		close(t.fired)
	}
}

// collectorRace: see opCollectorRace.
func (r *runner) collectorRace(op Op) error {
	rc, err := r.prepareRace(op)
	if rc == nil || !rc.live {
		return err // gone already: the collector has nothing of it left to delete
	}
	if !r.waitOwned(rc) {
		r.logf("collector-race: the Secrets of %s are not all owned by it within %s: the sweep, not the collector, may take them", rc.from, ownedBound)
	}
	what := "creating " + rc.name + " as OLM's operator-controller with the stored refs of " + rc.from + " while the guard is about to admit the collector's delete of one of them"
	var judged []corev1.Secret
	var created error
	trap := &sweepTrap{keys: rc.keys, guard: true, fired: make(chan struct{}), spring: func(secrets []corev1.Secret) {
		// The Secret as it is now, before the delete the guard is about to admit: its answer is
		// then that it is gone or at another version.
		for i := range secrets {
			sec := &corev1.Secret{}
			if err := r.admin.Get(r.ctx(), client.ObjectKeyFromObject(&secrets[i]), sec); err == nil {
				judged = append(judged, *sec)
			}
		}
		created = expect(what, r.olm.Create(r.ctx(), rc.next.DeepCopy()))
		if created == nil {
			// Remembered at once: the guard answers, and the delete runs, as soon as this returns.
			r.rememberRace(rc)
		}
	}}
	r.env.arm(trap)
	defer r.env.disarm(trap)
	if fired, err := r.startRace(rc, trap, "collector-race", metav1.DeletePropagationBackground); !fired || err != nil {
		return err
	}
	if created != nil {
		return created
	}
	r.logf("collector-race: the guard was about to admit the collector's delete of %s of %s; %s was created as OLM with its refs first", secretNames(judged), rc.from, rc.name)
	r.waitDeleteAnswered(judged)
	// The guard's quarantine copies (of this Secret and of every other one the collector deleted)
	// are restored by the sweep for a live set that references them: every Secret Rev references
	// must be back, while Rev is live.
	if err := r.checkRestored(rc.name, rc.target, rc.keys, 30*time.Second, "deleted by the collector and not restored by the sweep"); err != nil {
		return err
	}
	r.logf("collector-race: %s", r.deleteOutcome(judged))
	return nil
}

// deleteOutcome says what became of the judged Secrets: deleted and created again (another uid:
// restored from the guard's copy), or never deleted (the same uid: Rev's ownership patch changed it
// first, and the API server, running the guard again for the delete, was refused).
func (r *runner) deleteOutcome(judged []corev1.Secret) string {
	var out []string
	for i := range judged {
		cur := &corev1.Secret{}
		switch err := r.admin.Get(r.ctx(), client.ObjectKeyFromObject(&judged[i]), cur); {
		case err != nil:
			out = append(out, judged[i].Name+": "+err.Error())
		case cur.UID != judged[i].UID:
			out = append(out, judged[i].Name+" was deleted and created again")
		default:
			out = append(out, judged[i].Name+" was not deleted")
		}
	}
	return strings.Join(out, "; ")
}

// waitOwned waits (at most ownedBound) until Secret ownership has made From an owner of each of the
// race's Secrets, and reports whether it has.
func (r *runner) waitOwned(rc *race) bool {
	from := &olmv1.ClusterObjectSet{}
	if err := r.admin.Get(r.ctx(), client.ObjectKey{Name: rc.from}, from); err != nil {
		return false
	}
	err := wait.PollUntilContextTimeout(r.ctx(), pollInterval, ownedBound, true, func(ctx context.Context) (bool, error) {
		for key := range rc.keys {
			sec := &corev1.Secret{}
			if err := r.admin.Get(ctx, key, sec); err != nil {
				return false, nil //nolint:nilerr // missing, or a read that failed: look again
			}
			if !slices.ContainsFunc(sec.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == from.UID }) {
				return false, nil
			}
		}
		return true, nil
	})
	return err == nil
}

func secretNames(secrets []corev1.Secret) []string {
	names := make([]string, len(secrets))
	for i := range secrets {
		names[i] = secrets[i].Name
	}
	return names
}
