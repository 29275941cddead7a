package adversarial_test

// The ops of the concurrent mode: orphan-delete and re-create from the stored form, copies of a
// revision that is gone, GitOps waves, forged admissions and slow clients on the webhook port, bursts
// of large creates, kubectl cos apply (a variant of apply), refs outside the system namespace and
// Secrets written as OLM writes them.

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/cmd/kubectl-cos/commands"
	"github.com/cos-externalizer/cos-externalizer/controllers"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/naming"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// burstOwner is the first owner of a burst's revisions (burstOwner+i for its i-th create), apart
// from the others.
const burstOwner = 10

// generateNew draws the targets of the new kinds into op (see generateFrom), which pickLive and next
// set too: op must be generateFrom's own, not a copy.
func generateNew(r *rand.Rand, m *model, op *Op, pickLive func(func(*entry) bool) (*entry, bool), next func(int)) bool {
	usable := func(e *entry) bool { return !e.bad && !e.empty && !e.lost && e.owner < owners }
	switch op.Kind {
	case opOrphanRecreate:
		e, ok := pickLive(usable)
		if !ok {
			return false
		}
		op.Variant = []string{"same", "other"}[r.IntN(2)]
		if op.Variant == "other" {
			op.From = e.rev
			next(e.owner)
		}
	case opCopyGone, opWave:
		var src *entry
		if op.Kind == opCopyGone {
			var gone []string
			for name, e := range m.entries {
				if e.gone && usable(e) && len(e.phases) > 0 {
					gone = append(gone, name)
				}
			}
			if len(gone) == 0 {
				return false
			}
			slices.Sort(gone)
			src = m.entries[gone[r.IntN(len(gone))]]
		} else {
			var ok bool
			if src, ok = pickLive(usable); !ok {
				return false
			}
		}
		op.From = src.rev
		next(src.owner)
	case opForged:
		op.Variant = []string{"write", "probe", "old"}[r.IntN(3)]
	case opForeign:
		op.Variant = []string{"probe", "marker"}[r.IntN(2)]
	case opOLMSecret:
		next(r.IntN(owners))
	case opBurst:
		// Revision Rev of every burst owner: each one's next (another op may have made a revision
		// of one of them: a copy of a burst's revision, an empty one).
		n := int(envUint("COS_ADV_BURST", 2))
		op.Owner = burstOwner
		for i := range n {
			op.Rev = max(op.Rev, m.nextRev[burstOwner+i]+1)
		}
		for i := range n {
			m.nextRev[burstOwner+i] = op.Rev
		}
		op.Variant = fmt.Sprint(n)
	case opProxy:
		op.Variant = []string{"delay", "delay", "blackhole", "cut"}[r.IntN(4)]
	case opPause:
		op.Variant = []string{"etcd", "kube-apiserver"}[r.IntN(2)]
	case opSkew, opSweepSkew:
		op.Variant = []string{"6m", "-6m", "0s"}[r.IntN(3)]
	case opSweepRace, opOLMSweepRace, opSweepKill, opRefsFailRace, opCollectorRace:
		// Secrets no other revision uses, so that the sweep (collector-race: the collector) comes for
		// them.
		e, ok := pickLive(func(e *entry) bool { return usable(e) && len(e.refs) > 0 && !m.shares(e) })
		if !ok {
			return false
		}
		op.From = e.rev
		next(e.owner)
		switch op.Kind {
		case opSweepKill:
			op.Variant = []string{controllers.StepCopied, controllers.StepDeleted}[r.IntN(2)]
		case opRefsFailRace:
			op.Variant = []string{"unreachable-before", "unreachable-after", "timeout-before", "timeout-after"}[r.IntN(4)]
		}
	case opClientCAGarbage:
		op.Variant = []string{"garbage", "empty", "truncated", "missing"}[r.IntN(4)]
	case opSlowClient, opUnusedDelete, opLedgerFill, opAmplify:
	default:
		return false
	}
	return true
}

func (r *runner) execNew(op Op) error {
	switch op.Kind {
	case opOrphanRecreate:
		return r.orphanRecreate(op)
	case opCopyGone:
		return r.copyGone(op)
	case opWave:
		return r.wave(op)
	case opForged:
		return r.forged(op)
	case opSlowClient:
		return r.slowClient(op)
	case opBurst:
		return r.burst(op)
	case opForeign:
		return r.foreign(op)
	case opOLMSecret:
		return r.olmSecret(op)
	case opUnusedDelete:
		return r.unusedDelete(op)
	case opSweepRace, opOLMSweepRace:
		return r.sweepRace(op)
	case opSweepKill:
		return r.sweepKill(op)
	case opCollectorRace:
		return r.collectorRace(op)
	case opRefsFailRace:
		return r.refsFailRace(op)
	case opLedgerFill:
		return r.ledgerFill(op)
	case opAmplify:
		return r.amplify(op)
	case opClientCAGarbage:
		return r.clientCAGarbage(op)
	case opSweepSkew:
		return r.sweepSkew(op)
	case opProxy, opPause, opSkew:
		return r.nemesis(op)
	}
	return fmt.Errorf("unknown op %q", op.Kind)
}

// storedForm is what `kubectl get -o yaml` gives back to apply: spec, labels and annotations.
func storedForm(stored *olmv1.ClusterObjectSet) *olmv1.ClusterObjectSet {
	return &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: stored.Name, Labels: stored.Labels, Annotations: stored.Annotations}, Spec: *stored.Spec.DeepCopy()}
}

// orphanRecreate deletes a revision with orphan propagation (keep the workloads) and, 0-3 s later
// (the user's gap between two commands, seeded), creates it again from its stored form (refs): under
// the same name, or as the next revision.
func (r *runner) orphanRecreate(op Op) error {
	rev := op.Rev
	if op.Variant == "other" {
		rev = op.From
	}
	name := r.m.name(op.Owner, rev)
	e, stored, err := r.source(name)
	if e == nil || !stored.DeletionTimestamp.IsZero() {
		return err
	}
	again := storedForm(stored)
	if err := r.deleteAndWait(name, metav1.DeletePropagationOrphan); err != nil {
		return err
	}
	// The user's own gap between the two commands, 0-3 s (seeded): a sweep tick or more passes.
	time.Sleep(time.Duration(op.Seed%3000) * time.Millisecond)
	target := e
	if op.Variant == "other" {
		again = r.revision(op, builders.WithPhases(stored.Spec.Phases...))
		target = &entry{owner: op.Owner, rev: op.Rev, objs: e.objs}
	}
	if err := expect("re-creating "+again.Name+" from its stored form", r.admin.Create(r.ctx(), again)); err != nil {
		return err
	}
	if op.Variant == "other" {
		return r.rememberCopy(again.Name, target)
	}
	// Re-created from its stored form, Archived maybe, it may be pruned at once.
	return r.rememberExisting(op, again.Name, target, true, again.Spec.LifecycleState == olmv1.LifecycleStateArchived)
}

// copyGone creates a new revision with the stored refs of a revision that is gone, as a user with
// its YAML would.
func (r *runner) copyGone(op Op) error {
	src := r.entry(r.m.name(op.Owner, op.From))
	if src == nil || len(src.phases) == 0 {
		return nil
	}
	return r.createCopy(op, "with the refs of a revision that is gone", src.phases, src.objs)
}

// wave is a GitOps sync wave: revision From is pruned and revision Rev, with From's refs, created at
// the same instant.
func (r *runner) wave(op Op) error {
	from := r.m.name(op.Owner, op.From)
	src, stored, err := r.source(from)
	if src == nil || !stored.DeletionTimestamp.IsZero() {
		return err
	}
	name := r.m.name(op.Owner, op.Rev)
	next := r.revision(op, builders.WithPhases(stored.Spec.Phases...))
	var created, pruned error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		created = expect("creating "+name+" in a wave", r.admin.Create(r.ctx(), next))
	}()
	go func() {
		defer wg.Done()
		pruned = r.deleteAndWait(from, metav1.DeletePropagationBackground)
	}()
	wg.Wait()
	if pruned != nil {
		return pruned
	}
	if created != nil {
		return created
	}
	return r.rememberCopy(name, &entry{owner: op.Owner, rev: op.Rev, objs: src.objs})
}

// webhookClient is a TLS client of the webhook port with no client certificate, as any Pod has.
func webhookClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // the forger trusts anything
	}}
}

const mutatePath = "/mutate-olm-operatorframework-io-v1-clusterobjectset"

// forge posts an AdmissionReview of a ClusterObjectSet straight to the mutating webhook. It returns
// the answer's body, or the error of a caller refused before any handler ran (at the TLS
// handshake, when the webhook authenticates its callers).
func (r *runner) forge(operation admissionv1.Operation, obj, old *olmv1.ClusterObjectSet) (string, error) {
	body, err := forgedReview(operation, obj, old, "system:serviceaccount:olmv1-system:operator-controller-controller-manager", false)
	if err != nil {
		return "", err
	}
	if r.env.mgr == nil {
		return "", fmt.Errorf("no manager")
	}
	resp, err := webhookClient().Post(r.env.mgr.WebhookURL+mutatePath, "application/json", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(resp.Body)
	return string(answer), err
}

// forged sends forged admissions straight to the webhook port: a large CREATE that would write
// Secrets (write), refs-only CREATEs probing a planted Secret and an absent one (probe), an UPDATE
// whose old object refs the planted value (old). With the caller authenticated, each must be refused
// at the handshake and cause no write; without, the invariants are held only under gate "forged" and
// "leak" (issue 27 section 1).
func (r *runner) forged(op Op) error {
	name := fmt.Sprintf("%s-forged-%d", r.m.run, op.Seed%100000)
	refused := func(err error) error {
		r.logf("forged %s: refused before any handler ran: %v", op.Variant, err)
		return r.checkNoForgedWrite(name, true)
	}
	switch op.Variant {
	case "write":
		c := r.inlineCOS(Op{Owner: 0, Rev: 1}, r.m.objects(0, 1, op.Seed, true))
		c.Name = name
		c.Annotations = map[string]string{"cos-externalizer.io/externalize": "always"}
		answer, err := r.forge(admissionv1.Create, c, nil)
		if err != nil {
			return refused(err)
		}
		if strings.Contains(answer, secretMark) {
			return violated("content-leaked", "a forged admission's answer holds submitted content")
		}
		return r.checkNoForgedWrite(name, false)
	case "probe":
		probe := func(key types.NamespacedName) (string, error) {
			c := r.revision(Op{Owner: 0, Rev: 1}, builders.WithPhase("configuration", builders.Ref(key.Name, key.Namespace, "nokey")))
			c.Name = name
			answer, err := r.forge(admissionv1.Create, c, nil)
			return strings.ReplaceAll(answer, key.Name, "SECRET"), err
		}
		planted, err := probe(r.plant.foreign)
		if err != nil {
			return refused(err)
		}
		absent, err := probe(r.plant.absent)
		if err != nil {
			return refused(err)
		}
		return r.judgeProbe("a forged refs-only CREATE", planted, absent)
	default: // old: new inline phases, so the handler compares them with the old refs' content
		old := r.revision(Op{Owner: 0, Rev: 1}, builders.WithPhase("configuration",
			builders.Ref(r.plant.foreign.Name, r.plant.foreign.Namespace, plantKey), builders.Ref(r.plant.opaque.Name, "", plantKey)))
		old.Name = name
		c := r.inlineCOS(Op{Owner: 0, Rev: 1}, r.m.objects(0, 1, op.Seed, false))
		c.Name = name
		answer, err := r.forge(admissionv1.Update, c, old)
		if err != nil {
			return refused(err)
		}
		return r.judgeLeak("a forged UPDATE whose old object refs a planted Secret", answer)
	}
}

// judgeProbe: answers about a planted Secret and an absent one (names replaced) must be the same,
// and carry nothing of the planted one.
func (r *runner) judgeProbe(what, planted, absent string) error {
	if err := r.judgeLeak(what, planted); err != nil {
		return err
	}
	if normalizeUID(planted) != normalizeUID(absent) {
		if !gateOpen("leak") {
			r.skip("leak", what+": the answers about an existing and an absent Secret differ (existence leaks)")
			r.logf("%s: existence leaks: %q vs %q", what, trim(planted), trim(absent))
			return nil
		}
		return violated("secret-leaked", "%s: the answer about an existing Secret differs from the one about an absent Secret: %q vs %q", what, trim(planted), trim(absent))
	}
	return nil
}

func (r *runner) judgeLeak(what, answer string) error {
	if leaked := r.plant.leak(answer); leaked != "" {
		if !gateOpen("leak") {
			r.skip("leak", what+": the answer carries "+leaked)
			r.logf("%s: the answer carries %s", what, leaked)
			return nil
		}
		return violated("secret-leaked", "%s: the answer carries %s", what, leaked)
	}
	return nil
}

// normalizeUID drops the review's uid from an answer.
func normalizeUID(s string) string {
	if i := strings.Index(s, `"uid":"`); i >= 0 {
		if j := strings.Index(s[i+7:], `"`); j >= 0 {
			return s[:i] + s[i+7+j:]
		}
	}
	return s
}

func trim(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

// checkNoForgedWrite: a forged admission wrote no object-data Secret. With the caller refused at
// the handshake it must hold; otherwise (no client authentication) only under gate "forged".
func (r *runner) checkNoForgedWrite(name string, authenticated bool) error {
	secrets := &corev1.SecretList{}
	if err := r.admin.List(r.ctx(), secrets, client.InNamespace(testenv.SystemNamespace),
		client.MatchingLabels{olmv1.LabelRevisionName: naming.RevisionLabelValue(name)}); err != nil {
		return err
	}
	if len(secrets.Items) == 0 {
		return nil
	}
	var size int
	for _, s := range secrets.Items {
		for _, v := range s.Data {
			size += len(v)
		}
	}
	if authenticated || gateOpen("forged") {
		return violated("forged-write", "a forged admission (no client certificate) wrote %d Secrets (%d bytes) for %s", len(secrets.Items), size, name)
	}
	r.skip("forged", "a forged admission causes no write (the webhook server accepts any TLS client: client authentication is off)")
	r.logf("forged admission for %s wrote %d Secrets (%d bytes)", name, len(secrets.Items), size)
	return nil
}

// slowClient opens a TLS connection to the webhook port and trickles a request's body a byte at a
// time. The webhook server must close it (a read timeout) under gate "slow-client"; meanwhile the
// round's other ops must be served as ever.
func (r *runner) slowClient(op Op) error {
	if r.env.mgr == nil {
		return nil
	}
	u, err := url.Parse(r.env.mgr.WebhookURL)
	if err != nil {
		return err
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", u.Host, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // the caller trusts anything
	if err != nil {
		r.logf("slow client: refused at the handshake: %v", err)
		return nil
	}
	defer func() { _ = conn.Close() }()
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n{", mutatePath, u.Host); err != nil {
		r.logf("slow client: closed before its headers were sent: %v", err)
		return nil
	}
	bound := time.Duration(2+op.Seed%4) * time.Second
	if gateOpen("slow-client") {
		bound = 2 * time.Minute // well past any read timeout the server should have
	}
	start := time.Now()
	for time.Since(start) < bound {
		_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := conn.Write([]byte(" ")); err != nil {
			r.logf("slow client: the server closed the connection after %s", time.Since(start).Round(time.Millisecond))
			return nil
		}
		// Is it closed? A read that times out at once says not yet.
		_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if _, err := conn.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
			r.logf("slow client: the server closed the connection after %s", time.Since(start).Round(time.Millisecond))
			return nil
		}
	}
	if gateOpen("slow-client") {
		return violated("slow-client", "a connection trickling its body was still open after %s", bound)
	}
	r.skip("slow-client", "the webhook server closes a connection that trickles its body")
	return nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// largeObjects returns about size bytes of manifests in ConfigMaps of at most 700 KB.
func (r *runner) largeObjects(owner int, rev int64, seed uint64, size int) [][]*unstructured.Unstructured {
	rng := rand.New(rand.NewPCG(seed, uint64(owner)))
	var phase []*unstructured.Unstructured
	for i := 0; size > 0; i++ {
		var b strings.Builder
		for b.Len() < min(size, 700_000) {
			fmt.Fprintf(&b, "%016x", rng.Uint64())
		}
		size -= b.Len()
		phase = append(phase, builders.ConfigMap(r.m.cmNamespace(), fmt.Sprintf("o%d-big-%d", owner, i),
			map[string]string{"marker": secretMark + r.m.run, "rev": fmt.Sprint(rev), "large": b.String()}))
	}
	return [][]*unstructured.Unstructured{phase}
}

// burst sends Variant large (2.8 MB) inline creates at once, one per owner burstOwner+i. Each is
// admitted or refused quickly with a retryable answer; a timeout is held a violation only under gate
// "burst-timeout" (issue 27 section 3).
func (r *runner) burst(op Op) error {
	n := int(envUintString(op.Variant, 2))
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			member := Op{Owner: burstOwner + i, Rev: op.Rev}
			objs := r.largeObjects(member.Owner, member.Rev, op.Seed+uint64(i), 2_800_000)
			c := r.inlineCOS(member, objs)
			err := r.admin.Create(r.ctx(), c)
			switch {
			case err == nil:
				errs[i] = r.remember(c.Name, &entry{owner: member.Owner, rev: member.Rev, objs: objs, inline: true})
			case apierrors.IsTooManyRequests(err) || strings.Contains(err.Error(), "try again"):
				r.logf("burst: %s refused, retryable: %v", c.Name, err)
			case apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || strings.Contains(err.Error(), "failed calling webhook"):
				if gateOpen("burst-timeout") {
					errs[i] = violated("burst-timeout", "a create of a burst of %d large ClusterObjectSets timed out instead of a quick refusal: %v", n, err)
				} else {
					r.skip("burst-timeout", "a burst's large creates are admitted or refused quickly, never time out")
					r.logf("burst: %s timed out: %v", c.Name, err)
				}
			default:
				errs[i] = expect("creating "+c.Name+" in a burst", err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func envUintString(s string, def uint64) uint64 {
	var n uint64
	if _, err := fmt.Sscan(s, &n); err != nil || n == 0 {
		return def
	}
	return n
}

// foreign: mallory, who may read no Secret, creates ClusterObjectSets through the API server with
// refs into another namespace: to a planted Secret and an absent one with a key neither has (probe:
// the answers must be the same), or to the planted value itself and to the system namespace's
// Opaque one (marker: nothing of them in the answer, the warnings or, once reconciled, the
// conditions).
func (r *runner) foreign(op Op) error {
	name := fmt.Sprintf("%s-foreign-%d", r.m.run, op.Seed%100000)
	create := func(refs ...olmv1.ClusterObjectSetObject) string {
		c := r.revision(Op{Owner: 8, Rev: int64(1 + op.Seed%1000)}, builders.WithPhase("configuration", refs...))
		c.Name = name
		before := len(r.plant.warnings.List())
		err := r.plant.mallory.Create(r.ctx(), c)
		answer := "admitted"
		if err != nil {
			answer = err.Error()
		}
		answer += " " + strings.Join(r.plant.warnings.List()[before:], "; ")
		return strings.ReplaceAll(answer, name, "NAME")
	}
	defer func() {
		_ = r.admin.Delete(r.ctx(), &olmv1.ClusterObjectSet{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}()
	if op.Variant == "probe" {
		planted := strings.ReplaceAll(create(builders.Ref(r.plant.foreign.Name, r.plant.foreign.Namespace, "nokey")), r.plant.foreign.Name, "SECRET")
		if err := r.deleteAndWait(name, metav1.DeletePropagationBackground); err != nil {
			return err
		}
		absent := strings.ReplaceAll(create(builders.Ref(r.plant.absent.Name, r.plant.absent.Namespace, "nokey")), r.plant.absent.Name, "SECRET")
		return r.judgeProbe("a refs-only create by a user who may read no Secret", planted, absent)
	}
	answer := create(builders.Ref(r.plant.foreign.Name, r.plant.foreign.Namespace, plantKey), builders.Ref(r.plant.opaque.Name, "", plantKey))
	if err := r.judgeLeak("a create with refs to Secrets its user may not read", answer); err != nil {
		return err
	}
	if !strings.HasPrefix(answer, "admitted") {
		return nil
	}
	// Once the reconciler has said something about it, nothing of the planted Secrets in it.
	var msgs string
	_ = wait.PollUntilContextTimeout(r.ctx(), pollInterval, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		c := &olmv1.ClusterObjectSet{}
		if err := r.admin.Get(ctx, client.ObjectKey{Name: name}, c); err != nil {
			return false, nil //nolint:nilerr // look again
		}
		msgs = testenv.Conditions(c)
		return len(c.Status.Conditions) > 0, nil
	})
	if leaked := r.plant.leak(msgs); leaked != "" {
		return violated("secret-leaked", "the conditions of %s, with refs to Secrets its user may not read, carry %s", name, leaked)
	}
	return r.deleteAndWait(name, metav1.DeletePropagationBackground)
}

// olmSecret writes a Secret as OLM's operator-controller does (its own name, hand-written keys that
// are not content keys, the owner-name label, no owners), then a revision referencing it, then OLM's
// owner patch: the revision must roll out and keep its content like any other.
func (r *runner) olmSecret(op Op) error {
	name := r.m.name(op.Owner, op.Rev)
	objs := r.m.objects(op.Owner, op.Rev, op.Seed, false)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SystemNamespace, Name: name + "-olm",
		Labels: map[string]string{olmv1.LabelRevisionName: naming.RevisionLabelValue(name), olmv1.LabelOwnerName: r.m.ownerLabel(op.Owner)}},
		Immutable: ptr.To(true), Type: olmv1.SecretTypeObjectData, Data: map[string][]byte{}}
	var opts []builders.Option
	for pi, phase := range objs {
		var refs []olmv1.ClusterObjectSetObject
		for oi, o := range phase {
			data, err := content.Canonical(o.Object)
			if err != nil {
				return err
			}
			key := fmt.Sprintf("phase%d-object%d.json", pi, oi) // not a content key
			sec.Data[key] = data
			refs = append(refs, builders.Ref(sec.Name, testenv.SystemNamespace, key))
		}
		opts = append(opts, builders.WithPhase([]string{"configuration", "deploy"}[pi], refs...))
	}
	if err := expect("OLM's create of Secret "+sec.Name, r.olm.Create(r.ctx(), sec.DeepCopy()), apierrors.IsAlreadyExists); err != nil {
		return err
	}
	c := r.revision(op, opts...)
	if err := expect("OLM's create of "+name, r.olm.Create(r.ctx(), c)); err != nil {
		return err
	}
	if err := r.remember(name, &entry{owner: op.Owner, rev: op.Rev, objs: objs}); err != nil {
		return err
	}
	patched := sec.DeepCopy()
	patched.OwnerReferences = []metav1.OwnerReference{{APIVersion: olmv1.GroupVersion.String(), Kind: olmv1.ClusterObjectSetKind,
		Name: c.Name, UID: c.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	return expect("OLM's owner patch of Secret "+sec.Name, r.olm.Patch(r.ctx(), patched, client.MergeFrom(sec)), apierrors.IsNotFound)
}

// unusedDelete: an admin deletes an object-data Secret that no ClusterObjectSet uses (written and
// never referenced): the guard must admit it, at the latest once its cache delay has passed.
func (r *runner) unusedDelete(op Op) error {
	key := types.NamespacedName{Namespace: testenv.SystemNamespace, Name: fmt.Sprintf("%s-unused-%d", r.m.run, op.Seed%100000)}
	data := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"unused"}}`)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
		Labels: map[string]string{olmv1.LabelRevisionName: key.Name}},
		Immutable: ptr.To(true), Type: olmv1.SecretTypeObjectData, Data: map[string][]byte{content.Key(data): data}}
	if err := expect("creating an unused Secret", r.admin.Create(r.ctx(), sec), apierrors.IsAlreadyExists); err != nil {
		return err
	}
	err := r.alice.Delete(r.ctx(), sec)
	if apierrors.IsForbidden(err) {
		return r.guardRefusedUnused(Op{Kind: opSecretDel}, key, err)
	}
	return expect("deleting an unused Secret", err, apierrors.IsNotFound)
}

// kubectlCOS applies c with `kubectl cos apply` in this process, pausing between its Secret writes
// and its ClusterObjectSet (its test hook) for up to 3 s.
func (r *runner) kubectlCOS(c *olmv1.ClusterObjectSet, seed uint64) error {
	dir, err := os.MkdirTemp("", "adv-kubectl-cos-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	c.APIVersion, c.Kind = olmv1.GroupVersion.String(), olmv1.ClusterObjectSetKind
	raw, err := json.Marshal(c)
	if err != nil {
		return err
	}
	file := filepath.Join(dir, "cos.json")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		return err
	}
	pause := time.Duration(seed%3000) * time.Millisecond
	var out bytes.Buffer
	cmd := commands.NewCommandWithHooks(genericiooptions.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: &out}, commands.Hooks{
		AfterSecrets: func(ctx context.Context, _ string) error {
			select { // the deterministic pause between the Secrets and the ClusterObjectSet
			case <-time.After(pause):
			case <-ctx.Done():
			}
			return nil
		},
	})
	cmd.SetArgs([]string{"apply", "-f", file, "--kubeconfig", testenv.Env.Kubeconfig, "--server-side", "--externalize=always", "--progress=never"})
	if err := cmd.ExecuteContext(r.ctx()); err != nil {
		return fmt.Errorf("kubectl cos apply: %w: %s", err, out.String())
	}
	return nil
}
