package adversarial_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
	"github.com/cos-externalizer/cos-externalizer/internal/secretuse"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// heapBound is the most heap the process (the manager and this test) may hold in use after a step:
// the manager's container limit is 1 GiB.
const heapBound = 1 << 30

// rssBound is the most the process's resident set may reach, sampled every 20 ms: the manager's
// container limit (1 GiB), which the managers of this process must keep within with the test itself.
const rssBound = 1 << 30

// runSets lists the ClusterObjectSets of this run from the API server.
func (r *runner) runSets(ctx context.Context) ([]olmv1.ClusterObjectSet, error) {
	list := &olmv1.ClusterObjectSetList{}
	if err := r.admin.List(ctx, list); err != nil {
		return nil, err
	}
	out := slices.DeleteFunc(list.Items, func(c olmv1.ClusterObjectSet) bool { return !strings.HasPrefix(c.Name, r.m.run+"-") })
	return out, nil
}

// checkAlways holds after every step, at once (no wait):
//   - every Secret that a live ClusterObjectSet references exists, holds the key, and resolves to
//     the content that was submitted (inline objects too);
//   - a revision archived by a successor was archived only once that successor succeeded;
//   - the heap stays under heapBound.
func (r *runner) checkAlways() error {
	ctx := r.ctx()
	sets, err := r.checkLiveSets(ctx)
	if err != nil {
		return err
	}
	for i := range sets {
		cos := &sets[i]
		e := r.entry(cos.Name)
		if !secretuse.Live(cos) || e == nil {
			continue
		}
		r.mu.Lock()
		err := r.checkArchived(cos, e, sets)
		r.mu.Unlock()
		if err != nil {
			return err
		}
	}
	if err := r.checkNoPlantLeak(); err != nil {
		return err
	}
	if peak := r.env.heapPeak(); peak > heapBound {
		return violated("heap", "heap in use peaked at %d bytes, over the bound of %d", peak, heapBound)
	}
	if peak := r.env.rssPeakBytes(); peak > rssBound {
		return violated("rss", "the resident set of the process (the managers run in it) peaked at %d MiB, over the manager's limit of %d MiB", peak>>20, rssBound>>20)
	}
	return nil
}

// checkLive: every Secret a live ClusterObjectSet references exists, holds its key and resolves to
// what was submitted; and no managed object was replaced under a live controller (checkUIDs). The
// observer runs it over and over while a round runs.
func (r *runner) checkLive(ctx context.Context) error {
	_, err := r.checkLiveSets(ctx)
	return err
}

func (r *runner) checkLiveSets(ctx context.Context) ([]olmv1.ClusterObjectSet, error) {
	sets, err := r.runSets(ctx)
	if err != nil {
		return nil, err
	}
	for i := range sets {
		cos := &sets[i]
		e := r.entry(cos.Name)
		if !secretuse.Live(cos) || e == nil || e.lost || r.goneInModel(e) {
			continue // unknown, lost, or being deleted and made again by an op (restore, recreate)
		}
		if err := r.checkContent(ctx, cos, e); err != nil {
			return nil, err
		}
	}
	return sets, r.checkUIDs(ctx, sets)
}

// sampleHeap records the peak heap in use and the peak resident set of the process (the managers
// run in it) every 20 ms until stop is closed: a decoding that allocates past the bound and frees it
// before a step ends is still seen.
func (h *harness) sampleHeap(stop <-chan struct{}) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	var ms runtime.MemStats
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		runtime.ReadMemStats(&ms)
		rss := residentBytes()
		h.mu.Lock()
		h.peak = max(h.peak, ms.HeapInuse)
		h.rssPeak = max(h.rssPeak, rss)
		h.mu.Unlock()
	}
}

// residentBytes is the process's resident set (VmRSS), from /proc/self/statm; 0 where there is none.
func residentBytes() uint64 {
	raw, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(raw))
	if len(fields) < 2 {
		return 0
	}
	pages, err := strconv.ParseUint(fields[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
}

func (h *harness) rssPeakBytes() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rssPeak
}

func (h *harness) heapPeak() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.peak
}

func (r *runner) checkContent(ctx context.Context, cos *olmv1.ClusterObjectSet, e *entry) error {
	for pi, p := range cos.Spec.Phases {
		for oi, o := range p.Objects {
			var got map[string]any
			if o.IsRef() {
				key, _ := o.SecretRef(testenv.SystemNamespace)
				sec := &corev1.Secret{}
				if err := r.admin.Get(ctx, key, sec); err != nil {
					if !apierrors.IsNotFound(err) {
						return err
					}
					// The list that found cos live came first: the reconciler may have pruned it since,
					// and the collector taken its Secret. Content is lost only if cos is still live.
					if live, err := r.stillLive(ctx, cos); err != nil || !live {
						return err
					}
					// Swept while cos was being created: the sweep holds a copy and restores it at its
					// next look (controllers.OrphanSweeper.Restore). Not lost, unless quiescence has
					// passed and it is still only a copy.
					q, err := r.quarantined(ctx, key)
					if err != nil {
						return err
					}
					if q == nil || r.settled.Load() {
						return violated("content-lost", "Secret %s, referenced by live %s at phase %d object %d, is gone (quarantined: %v)", key, cos.Name, pi, oi, q != nil)
					}
					sec = q
				}
				stored, ok := sec.Data[o.Ref.Key]
				if !ok {
					return violated("content-lost", "Secret %s, referenced by live %s, lost key %s", key, cos.Name, o.Ref.Key)
				}
				if e.bad {
					continue
				}
				obj, err := content.Resolve(stored, o.Ref.Key, content.MaxDecompressedSize)
				if err != nil {
					return violated("content-lost", "Secret %s key %s of live %s does not resolve: %v", key, o.Ref.Key, cos.Name, err)
				}
				got = obj
			} else {
				got = o.Object.Object
			}
			if e.objs == nil {
				continue
			}
			if pi >= len(e.objs) || oi >= len(e.objs[pi]) {
				return violated("content-changed", "%s holds phase %d object %d, which was never submitted", cos.Name, pi, oi)
			}
			if err := sameContent(got, e.objs[pi][oi]); err != nil {
				return violated("content-changed", "%s phase %d object %d: %v", cos.Name, pi, oi, err)
			}
		}
	}
	return nil
}

func sameContent(got map[string]any, want *unstructured.Unstructured) error {
	g, err := content.Canonical(got)
	if err != nil {
		return err
	}
	w, err := content.Canonical(want.Object)
	if err != nil {
		return err
	}
	if !bytes.Equal(g, w) {
		// Names only: the content is what must never be printed.
		return fmt.Errorf("resolves to other content than was submitted for %s/%s", want.GetNamespace(), want.GetName())
	}
	return nil
}

// checkArchived: a revision archived by the reconciler (not by a user) has a complete successor of
// the same owner (with phases, succeeded), unless a later revision of that owner was deleted since.
func (r *runner) checkArchived(cos *olmv1.ClusterObjectSet, e *entry, sets []olmv1.ClusterObjectSet) error {
	if cos.Spec.LifecycleState != olmv1.LifecycleStateArchived || e.archivedByUs {
		return nil
	}
	for _, rev := range r.m.deletedRevs[e.owner] {
		if rev > e.rev {
			return nil
		}
	}
	for i := range sets {
		s := &sets[i]
		// Complete: it has phases (a revision created empty, to be filled later, is not) and succeeded.
		if s.Labels[olmv1.LabelOwnerName] == cos.Labels[olmv1.LabelOwnerName] && s.Spec.Revision > cos.Spec.Revision &&
			len(s.Spec.Phases) > 0 && apimeta.IsStatusConditionTrue(s.Status.Conditions, olmv1.ConditionSucceeded) {
			return nil
		}
	}
	return violated("archived-early", "%s was archived, but no later revision of its owner is complete (has phases and succeeded)", cos.Name)
}

// quiesce waits, each within its bound, until the run has settled, and checks:
//   - the newest revision of every owner, Active and valid, succeeds; a bad one is Blocked;
//   - what another client changed in their objects is restored;
//   - no object-data Secret of the run that nobody uses and no existing ClusterObjectSet owns
//     outlives its grace period plus a sweep;
//   - no condition, Event or log line holds submitted content.
func (r *runner) quiesce() error {
	if err := r.waitSettled(); err != nil {
		return err
	}
	if err := r.waitNoOrphans(); err != nil {
		return err
	}
	if err := r.waitSweepsPast(); err != nil {
		return err
	}
	if err := r.checkNoLeak(); err != nil {
		return err
	}
	r.settled.Store(true)
	defer r.settled.Store(false)
	return r.checkAlways()
}

// quarantined returns the sweep's quarantine copy of the Secret key with its data verified
// (secretdata.Restored), or nil when there is none.
func (r *runner) quarantined(ctx context.Context, key types.NamespacedName) (*corev1.Secret, error) {
	copies := &corev1.SecretList{}
	if err := r.admin.List(ctx, copies, client.InNamespace(key.Namespace), client.MatchingLabels{secretdata.LabelQuarantine: "true"}); err != nil {
		return nil, err
	}
	for i := range copies.Items {
		if of, _, ok := secretdata.QuarantineOf(&copies.Items[i]); ok && of == key {
			if restored, err := secretdata.Restored(&copies.Items[i]); err == nil {
				return restored, nil
			}
		}
	}
	return nil, nil
}

func (r *runner) waitSettled() error {
	var last string
	err := wait.PollUntilContextTimeout(r.ctx(), pollInterval, settleBound, true, func(ctx context.Context) (bool, error) {
		if r.env.heapPeak() > heapBound {
			return true, nil // the heap invariant holds while waiting too: reported below
		}
		sets, err := r.runSets(ctx)
		if err != nil {
			last = "listing: " + err.Error()
			return false, nil //nolint:nilerr // a list that failed says nothing yet: poll again (kept for the timeout message)
		}
		newest := map[string]*olmv1.ClusterObjectSet{}
		for i := range sets {
			s := &sets[i]
			if e := r.entry(s.Name); e != nil && e.bad {
				if !secretuse.Live(s) || s.Spec.LifecycleState != olmv1.LifecycleStateActive {
					continue // archived: nothing to resolve
				}
				if c := apimeta.FindStatusCondition(s.Status.Conditions, olmv1.ConditionProgressing); c == nil || c.Reason != olmv1.ReasonBlocked {
					last = fmt.Sprintf("%s with bad refs is not Blocked: %v", s.Name, s.Status.Conditions)
					return false, nil
				}
				continue
			}
			owner := s.Labels[olmv1.LabelOwnerName]
			if cur := newest[owner]; cur == nil || s.Spec.Revision > cur.Spec.Revision {
				newest[owner] = s
			}
		}
		for _, s := range newest {
			e := r.entry(s.Name)
			if e == nil || e.empty || e.bad || e.lost || !secretuse.Live(s) || s.Spec.LifecycleState != olmv1.LifecycleStateActive {
				continue
			}
			if !apimeta.IsStatusConditionTrue(s.Status.Conditions, olmv1.ConditionSucceeded) {
				last = fmt.Sprintf("%s has not succeeded: %v", s.Name, s.Status.Conditions)
				return false, nil
			}
			if msg := r.driftLeft(ctx, e); msg != "" {
				last = msg
				return false, nil
			}
		}
		return true, nil
	})
	if peak := r.env.heapPeak(); peak > heapBound {
		return violated("heap", "heap in use peaked at %d bytes, over the bound of %d", peak, heapBound)
	}
	if err != nil {
		return violated("not-settled", "not settled within %s: %s", settleBound, last)
	}
	return nil
}

// driftLeft says which object of e, a succeeded newest revision, differs from what it submitted.
func (r *runner) driftLeft(ctx context.Context, e *entry) string {
	for _, phase := range e.objs {
		for _, o := range phase {
			cm := &corev1.ConfigMap{}
			if err := r.admin.Get(ctx, types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}, cm); err != nil {
				return fmt.Sprintf("ConfigMap %s: %v", o.GetName(), err)
			}
			want, _, _ := unstructured.NestedStringMap(o.Object, "data")
			for k, v := range want {
				if cm.Data[k] != v {
					return fmt.Sprintf("ConfigMap %s/%s key %s is not restored", cm.Namespace, cm.Name, k)
				}
			}
		}
	}
	return ""
}

func (r *runner) waitNoOrphans() error {
	var last string
	bound := r.env.grace + 3*r.env.sweepEvery + settleBound/4
	err := wait.PollUntilContextTimeout(r.ctx(), pollInterval, bound, true, func(ctx context.Context) (bool, error) {
		secrets := &corev1.SecretList{}
		if err := r.admin.List(ctx, secrets, client.InNamespace(testenv.SystemNamespace), client.HasLabels{olmv1.LabelRevisionName}); err != nil {
			last = "listing Secrets: " + err.Error()
			return false, nil //nolint:nilerr // a list that failed says nothing yet: poll again (kept for the timeout message)
		}
		list := &olmv1.ClusterObjectSetList{}
		if err := r.admin.List(ctx, list); err != nil {
			last = "listing ClusterObjectSets: " + err.Error()
			return false, nil //nolint:nilerr // a list that failed says nothing yet: poll again (kept for the timeout message)
		}
		exists := map[types.UID]bool{}
		for _, c := range list.Items {
			exists[c.UID] = true
		}
		users := secretuse.BySecret(list.Items, testenv.SystemNamespace)
		for _, s := range secrets.Items {
			if s.Type != olmv1.SecretTypeObjectData || !strings.HasPrefix(s.Labels[olmv1.LabelRevisionName], r.m.run+"-") {
				continue
			}
			owned := slices.ContainsFunc(s.OwnerReferences, func(o metav1.OwnerReference) bool { return exists[o.UID] })
			if !owned && len(users[client.ObjectKeyFromObject(&s)]) == 0 {
				last = "Secret " + s.Name + " is used by no one and owned by no ClusterObjectSet"
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return violated("orphan-kept", "an orphaned Secret outlived its grace period and a sweep (%s): %s", bound, last)
	}
	return nil
}

// waitSweepsPast waits until the grace period of every object-data Secret of the run has passed and
// two sweeps have run since, so that the checks after it see whatever the sweep would delete. The
// sweep measures its grace on its own clock from the moment it first sees a Secret unused at its
// resourceVersion, and every op has completed before quiescence: so the grace starts at the latest
// now, or at a Secret created later by the API server (on the real clock). The last-used annotation
// is not read: the touch writes it on the sweep's clock, which sweep-skew shifts by minutes.
func (r *runner) waitSweepsPast() error {
	secrets := &corev1.SecretList{}
	if err := r.admin.List(r.ctx(), secrets, client.InNamespace(testenv.SystemNamespace), client.HasLabels{olmv1.LabelRevisionName}); err != nil {
		return err
	}
	newest := time.Now()
	for _, s := range secrets.Items {
		if strings.HasPrefix(s.Labels[olmv1.LabelRevisionName], r.m.run+"-") && s.CreationTimestamp.After(newest) {
			newest = s.CreationTimestamp.Time
		}
	}
	// A condition on the clock: the sweep's grace is measured against it.
	until := newest.Add(r.env.grace + 2*r.env.sweepEvery)
	return wait.PollUntilContextTimeout(r.ctx(), pollInterval, r.env.grace+settleBound, true, func(context.Context) (bool, error) {
		return time.Now().After(until), nil
	})
}

func (r *runner) checkNoLeak() error {
	ctx := r.ctx()
	sets, err := r.runSets(ctx)
	if err != nil {
		return err
	}
	for _, s := range sets {
		for _, c := range s.Status.Conditions {
			if strings.Contains(c.Message, secretMark) {
				return violated("content-leaked", "condition %s of %s holds submitted content", c.Type, s.Name)
			}
		}
	}
	core := &corev1.EventList{}
	if err := r.admin.List(ctx, core); err != nil {
		return err
	}
	for _, ev := range core.Items {
		if strings.Contains(ev.Message, secretMark) {
			return violated("content-leaked", "Event %s/%s holds submitted content", ev.Namespace, ev.Name)
		}
	}
	events := &eventsv1.EventList{}
	if err := r.admin.List(ctx, events); err != nil {
		return err
	}
	for _, ev := range events.Items {
		if strings.Contains(ev.Note, secretMark) {
			return violated("content-leaked", "Event %s/%s holds submitted content", ev.Namespace, ev.Name)
		}
	}
	if err := r.checkPlantInStatus(ctx); err != nil {
		return err
	}
	if line := r.env.leakedLine(); line != "" {
		return violated("content-leaked", "a log line holds submitted content (shown up to the mark): %s", line)
	}
	return nil
}

// stillLive reports whether cos, as listed, still exists with the same uid and is not being deleted.
func (r *runner) stillLive(ctx context.Context, cos *olmv1.ClusterObjectSet) (bool, error) {
	now := &olmv1.ClusterObjectSet{}
	if err := r.admin.Get(ctx, client.ObjectKeyFromObject(cos), now); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return now.UID == cos.UID && secretuse.Live(now), nil
}
