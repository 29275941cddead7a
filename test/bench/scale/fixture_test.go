package scale_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/certs"
	"github.com/cos-externalizer/cos-externalizer/cmd/cos-externalizer/app"
	"github.com/cos-externalizer/cos-externalizer/test/bench/procstat"
	"github.com/cos-externalizer/cos-externalizer/test/builders"
	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
	"github.com/cos-externalizer/cos-externalizer/test/e2e/local"
	"github.com/cos-externalizer/cos-externalizer/test/framework"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

// managerUser is the identity the manager processes run as (the admin kubeconfig impersonating it,
// bound to cluster-admin): the API server's flow control classifies its requests by it.
const managerUser = "cos-bench-manager"

// size is the fixture's shape, from the environment (defaults: the size).
type size struct {
	owners, revisions, objects, namespaces, parallel int
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func sizeFromEnv() size {
	return size{
		owners:     envInt("COS_SCALE_OWNERS", 200),
		revisions:  envInt("COS_SCALE_REVISIONS", 5),
		objects:    envInt("COS_SCALE_OBJECTS", 30),
		namespaces: envInt("COS_SCALE_NAMESPACES", 20),
		parallel:   envInt("COS_SCALE_PARALLEL", 16),
	}
}

func (s size) total() int { return s.owners * s.revisions }

// fixture is the control plane with the ClusterObjectSets, built once per run and shared by the
// benchmarks of the package (in source order; the noise benchmark, which adds objects, runs last).
type fixture struct {
	env        *testenv.Environment
	size       size
	lb         *local.Balancer
	certDir    string
	kubeconfig string // the admin's, impersonating managerUser
	manager    string // the binary
	ca         []byte // the webhook serving certificate's CA
	current    *managerProc
	// memoryLimit is the container limit in bytes the managers are told (COS_SCALE_MEMORY_LIMIT), unless
	// unlimited; "" none.
	memoryLimit string
	unlimited   bool

	createTime, settleTime time.Duration
}

var (
	fixOnce sync.Once
	fix     *fixture
	fixErr  error
	tmpDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fix != nil {
		if fix.current != nil {
			fix.current.stop()
		}
		_ = fix.lb.Close()
		_ = fix.env.Stop()
	}
	if tmpDir != "" {
		_ = os.RemoveAll(tmpDir)
	}
	os.Exit(code)
}

// getFixture builds the fixture on first use; a benchmark that cannot have it fails.
func getFixture(b *testing.B) *fixture {
	b.Helper()
	fixOnce.Do(func() { fix, fixErr = newFixture(b) })
	if fixErr != nil {
		b.Fatal(fixErr)
	}
	return fix
}

func newFixture(b *testing.B) (*fixture, error) {
	ctx := context.Background()
	var err error
	if tmpDir, err = os.MkdirTemp("", "cos-bench-scale-"); err != nil {
		return nil, err
	}
	f := &fixture{size: sizeFromEnv(), certDir: filepath.Join(tmpDir, "certs")}
	// COS_SCALE_MEMORY_LIMIT (a quantity: 384Mi) is the container memory limit the managers are told,
	// as the Deployment tells them (app.MemoryLimitEnv, from limits.memory): the Go runtime's soft
	// limit follows. The managers inherit this process's environment.
	if v := os.Getenv("COS_SCALE_MEMORY_LIMIT"); v != "" {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("COS_SCALE_MEMORY_LIMIT: %w", err)
		}
		f.memoryLimit = strconv.FormatInt(q.Value(), 10)
	}
	if f.manager = os.Getenv("COS_SCALE_MANAGER"); f.manager == "" {
		if f.manager, err = local.BuildManager(tmpDir); err != nil {
			return nil, err
		}
	}
	if f.env, err = testenv.Start(ctx); err != nil {
		return nil, err
	}
	c := f.env.Client
	for _, ns := range f.namespaceNames() {
		framework.EnsureNamespace(ctx, b, c, ns)
	}
	framework.EnsureNamespace(ctx, b, c, testenv.SystemNamespace)
	if err := f.identity(ctx); err != nil {
		return nil, err
	}
	bundle, err := certs.Generate([]string{"127.0.0.1"}, 24*time.Hour, time.Now())
	if err != nil {
		return nil, err
	}
	f.ca = bundle.CA
	if err := bundle.Write(f.certDir); err != nil {
		return nil, err
	}
	if f.lb, err = local.NewBalancer(); err != nil {
		return nil, err
	}
	manifests, err := controlplane.WebhookManifests()
	if err != nil {
		return nil, err
	}
	if err := controlplane.InstallWebhooks(ctx, f.env.Config, manifests, "https://"+f.lb.Addr(), bundle.CA); err != nil {
		return nil, err
	}
	f.current = f.start(b)
	f.current.waitWebhook(b, f)

	start := time.Now()
	if err := f.create(ctx); err != nil {
		return nil, err
	}
	f.createTime = time.Since(start)
	f.waitAllSettled(b)
	f.settleTime = time.Since(start) - f.createTime
	f.dumpSamples(ctx, b)
	b.Logf("fixture: %d ClusterObjectSets (%d owners x %d revisions, %d objects each) created through the webhook in %s with %d clients; first rollout settled %s later; load average %s",
		f.size.total(), f.size.owners, f.size.revisions, f.size.objects, f.createTime.Round(time.Second), f.size.parallel, f.settleTime.Round(time.Second), loadAverage())
	return f, nil
}

func (f *fixture) namespaceNames() []string {
	out := make([]string, f.size.namespaces)
	for i := range out {
		out[i] = fmt.Sprintf("scale-%02d", i)
	}
	return out
}

// identity binds managerUser to cluster-admin, writes its kubeconfig and installs flow schemas that
// sort its requests by verb: the API server's dispatched-request counter per flow schema then counts
// the manager's requests alone (the benchmark's client, system:masters, goes to the exempt schema).
func (f *fixture) identity(ctx context.Context) error {
	c := f.env.Client
	if err := c.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: managerUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: managerUser}},
	}); err != nil {
		return err
	}
	for i, s := range flowSchemas {
		rule := flowcontrolv1.PolicyRulesWithSubjects{
			Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: managerUser}}},
			ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
				Verbs: s.verbs, APIGroups: s.groups, Resources: s.resources, ClusterScope: true, Namespaces: []string{flowcontrolv1.NamespaceEvery},
			}},
		}
		if s.name == fsRead {
			rule.NonResourceRules = []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}}
		}
		if err := c.Create(ctx, &flowcontrolv1.FlowSchema{
			ObjectMeta: metav1.ObjectMeta{Name: s.name},
			Spec: flowcontrolv1.FlowSchemaSpec{
				PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "exempt"},
				MatchingPrecedence:         int32(40 + i),
				Rules:                      []flowcontrolv1.PolicyRulesWithSubjects{rule},
			},
		}); err != nil {
			return err
		}
	}
	cfg, err := clientcmd.LoadFromFile(f.env.Kubeconfig)
	if err != nil {
		return err
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate = managerUser
		a.ImpersonateGroups = []string{"system:authenticated"}
	}
	f.kubeconfig = filepath.Join(tmpDir, "kubeconfig-manager")
	return clientcmd.WriteToFile(*cfg, f.kubeconfig)
}

// The flow schemas of the manager's requests, first match wins (in this order).
const (
	fsLease  = "cos-bench-manager-lease"
	fsEvent  = "cos-bench-manager-event"
	fsReview = "cos-bench-manager-review"
	fsCreate = "cos-bench-manager-create"
	fsUpdate = "cos-bench-manager-update"
	fsPatch  = "cos-bench-manager-patch"
	fsDelete = "cos-bench-manager-delete"
	fsRead   = "cos-bench-manager-read"
)

var flowSchemas = []struct {
	name                     string
	verbs, groups, resources []string
}{
	{fsLease, []string{"*"}, []string{"coordination.k8s.io"}, []string{"leases"}},
	{fsEvent, []string{"*"}, []string{"", "events.k8s.io"}, []string{"events"}},
	// Reviews are creates that store nothing (the manager's SelfSubjectReview at start): reads.
	{fsReview, []string{"*"}, []string{"authentication.k8s.io", "authorization.k8s.io"}, []string{"*"}},
	{fsCreate, []string{"create"}, []string{"*"}, []string{"*"}},
	{fsUpdate, []string{"update"}, []string{"*"}, []string{"*"}},
	{fsPatch, []string{"patch"}, []string{"*"}, []string{"*"}},
	{fsDelete, []string{"delete", "deletecollection"}, []string{"*"}, []string{"*"}},
	{fsRead, []string{"*"}, []string{"*"}, []string{"*"}},
}

// revision is the ClusterObjectSet of revision r (1-based) of owner o: a phase of ServiceAccounts
// (a fifth of the objects) and one of ConfigMaps (about 200 bytes each), the same object names in
// every revision of the owner, a data value that differs. Every revision but the last is Archived.
func (f *fixture) revision(o, r int) *olmv1.ClusterObjectSet {
	ns := fmt.Sprintf("scale-%02d", o%f.size.namespaces)
	owner := fmt.Sprintf("ext-%03d", o)
	nSA := f.size.objects / 5
	var sas, cms []olmv1.ClusterObjectSetObject
	for i := range nSA {
		sa := &unstructured.Unstructured{}
		sa.SetAPIVersion("v1")
		sa.SetKind("ServiceAccount")
		sa.SetNamespace(ns)
		sa.SetName(fmt.Sprintf("%s-sa-%d", owner, i))
		sas = append(sas, builders.Inline(sa))
	}
	for i := range f.size.objects - nSA {
		cms = append(cms, builders.Inline(builders.ConfigMap(ns, fmt.Sprintf("%s-cm-%d", owner, i),
			map[string]string{"revision": strconv.Itoa(r), "payload": strings.Repeat(strconv.Itoa(i%10), 160)})))
	}
	state := olmv1.LifecycleStateArchived
	if r == f.size.revisions {
		state = olmv1.LifecycleStateActive
	}
	opts := []builders.Option{
		builders.WithRevision(int64(r)), builders.WithLifecycleState(state),
		builders.WithLabels(map[string]string{olmv1.LabelOwnerKind: "ClusterExtension", olmv1.LabelOwnerName: owner}),
		builders.WithAnnotations(map[string]string{admission.Annotation: string(admission.ModeAlways)}),
	}
	if len(sas) > 0 {
		opts = append(opts, builders.WithPhase("accounts", sas...))
	}
	opts = append(opts, builders.WithPhase("config", cms...))
	return builders.COS(fmt.Sprintf("%s-r%d", owner, r), opts...)
}

// create creates every revision through the webhook (inline objects, externalized into Secrets),
// size.parallel at a time.
func (f *fixture) create(ctx context.Context) error {
	return parallel(f.size.parallel, f.size.total(), func(i int) error {
		o, r := i/f.size.revisions, i%f.size.revisions+1
		if err := f.env.Client.Create(ctx, f.revision(o, r)); err != nil {
			return fmt.Errorf("creating revision %d of owner %d: %w", r, o, err)
		}
		return nil
	})
}

// parallel runs do(0..n-1), workers at a time, and returns the first error.
func parallel(workers, n int, do func(i int) error) error {
	var g errgroup.Group
	g.SetLimit(workers)
	for i := range n {
		g.Go(func() error { return do(i) })
	}
	return g.Wait()
}

// waitAllSettled waits until every Active revision has Succeeded and every Archived one is archived,
// each at its current generation (one list a poll).
func (f *fixture) waitAllSettled(b *testing.B) {
	b.Helper()
	// A list of every ClusterObjectSet is 10 MB at 1,000: listed at most once a second per 1,000, so
	// that the API server's work for the benchmark does not slow what it measures.
	every := time.Duration(max(1, f.size.total()/1000)) * time.Second
	var listed time.Time
	seen := ""
	framework.Eventually(framework.Within(b, 90*time.Minute), b, "every ClusterObjectSet settled", func(ctx context.Context) (bool, string) {
		if time.Since(listed) < every {
			return false, seen
		}
		listed = time.Now()
		ok, s := f.allSettled(ctx)
		seen = s
		return ok, s
	})
}

// allSettled is the check of waitAllSettled: one list.
func (f *fixture) allSettled(ctx context.Context) (bool, string) {
	list := &olmv1.ClusterObjectSetList{}
	if err := f.env.Client.List(ctx, list); err != nil {
		return false, err.Error()
	}
	pending := 0
	example := ""
	for i := range list.Items {
		c := &list.Items[i]
		typ, status, reason := olmv1.ConditionSucceeded, metav1.ConditionTrue, ""
		if c.Spec.LifecycleState == olmv1.LifecycleStateArchived {
			typ, status, reason = olmv1.ConditionProgressing, metav1.ConditionFalse, olmv1.ReasonArchived
		}
		cond := apimeta.FindStatusCondition(c.Status.Conditions, typ)
		if cond == nil || cond.Status != status || (reason != "" && cond.Reason != reason) || cond.ObservedGeneration != c.Generation {
			pending++
			example = c.Name + ": " + testenv.Conditions(c)
		}
	}
	if len(list.Items) < f.size.total() {
		return false, fmt.Sprintf("%d of %d ClusterObjectSets exist", len(list.Items), f.size.total())
	}
	return pending == 0, fmt.Sprintf("%d pending, e.g. %s", pending, example)
}

// managerProc is a manager process of the binary, as managerUser, behind the Balancer.
type managerProc struct {
	proc                            *controlplane.Process
	webhookPort, probePort, metrics int
	pprofPort                       int // 0: no profiling endpoints (COS_SCALE_PROFILE unset)
	started                         time.Time
}

// start starts a manager (args add flags) and makes it the Balancer's only backend.
func (f *fixture) start(b *testing.B, args ...string) *managerProc {
	b.Helper()
	return f.startBeside(b, nil, args...)
}

// startBeside starts a manager beside others, all of them the Balancer's backends.
func (f *fixture) startBeside(b *testing.B, others []*managerProc, args ...string) *managerProc {
	b.Helper()
	ports, err := controlplane.FreePorts(4)
	if err != nil {
		b.Fatal(err)
	}
	m := &managerProc{webhookPort: ports[0], probePort: ports[1], metrics: ports[2]}
	if os.Getenv(profileEnv) != "" {
		m.pprofPort = ports[3]
		args = append(args, "--pprof-bind-address=127.0.0.1:"+strconv.Itoa(m.pprofPort))
	}
	all := append([]string{
		"--kubeconfig=" + f.kubeconfig, "--log-level=error",
		"--webhook-host=127.0.0.1", "--webhook-port=" + strconv.Itoa(m.webhookPort), "--webhook-cert-dir=" + f.certDir,
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(m.probePort),
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(m.metrics), "--metrics-secure=false",
		"--system-namespace=" + testenv.SystemNamespace, "--rollout=true",
	}, args...)
	// The manager inherits this process's environment.
	if f.memoryLimit != "" && !f.unlimited {
		err = os.Setenv(app.MemoryLimitEnv, f.memoryLimit)
	} else {
		err = os.Unsetenv(app.MemoryLimitEnv)
	}
	if err != nil {
		b.Fatal(err)
	}
	m.started = time.Now()
	if m.proc, err = controlplane.StartProcess("manager", f.manager, all, f.env.LogPath(fmt.Sprintf("manager-%d", m.metrics))); err != nil {
		b.Fatal(err)
	}
	backends := []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(m.webhookPort))}
	for _, o := range others {
		backends = append(backends, net.JoinHostPort("127.0.0.1", strconv.Itoa(o.webhookPort)))
	}
	f.lb.SetBackends(backends)
	return m
}

func (m *managerProc) stop() { _ = m.proc.Stop(30 * time.Second) }

// eventually is framework.Eventually within the given time that fails at once when the manager exits.
func (m *managerProc) eventually(b *testing.B, within time.Duration, what string, cond func(context.Context) (bool, string)) {
	b.Helper()
	framework.Eventually(framework.Within(b, within), b, what, func(ctx context.Context) (bool, string) {
		select {
		case <-m.proc.Exited():
			b.Fatalf("manager exited: %v", m.proc.ExitError())
		default:
		}
		return cond(ctx)
	})
}

// waitWebhook waits until an admission request (a server-side dry run of a small externalized
// ClusterObjectSet) passes through the API server and this manager's webhooks, and returns the time
// since the manager started. The benchmark's dry runs are the admin's, not the manager's requests.
func (m *managerProc) waitWebhook(b *testing.B, f *fixture) time.Duration {
	b.Helper()
	var took time.Duration
	m.eventually(b, 5*time.Minute, "the webhook to answer", func(ctx context.Context) (bool, string) {
		cos := builders.COS("webhook-probe",
			builders.WithAnnotations(map[string]string{admission.Annotation: string(admission.ModeAlways)}),
			builders.WithPhase("config", builders.InlineConfigMaps("default", "probe", 1)...))
		if err := f.env.Client.Create(ctx, cos, client.DryRunAll); err != nil {
			return false, err.Error()
		}
		took = time.Since(m.started)
		return true, ""
	})
	return took
}

// metricsText is the manager's /metrics.
func (m *managerProc) metricsText(ctx context.Context) (string, error) {
	return testenv.ScrapeMetrics(ctx, "http://127.0.0.1:"+strconv.Itoa(m.metrics)+"/metrics")
}

func sum(text, prefix string, contains ...string) float64 {
	v, _ := testenv.SumMetric(strings.NewReader(text), prefix, contains...)
	return v
}

// reconcileState is what waitSettled reads from the manager's metrics.
type reconcileState struct {
	reconciles, depth, active, leader float64
}

func (m *managerProc) state(ctx context.Context) (reconcileState, error) {
	text, err := m.metricsText(ctx)
	if err != nil {
		return reconcileState{}, err
	}
	return reconcileState{
		reconciles: sum(text, `controller_runtime_reconcile_total{controller="clusterobjectset"`),
		depth:      sum(text, `workqueue_depth{`, `name="clusterobjectset"`),
		active:     sum(text, `controller_runtime_active_workers{controller="clusterobjectset"`),
		leader:     sum(text, `leader_election_master_status{`),
	}, nil
}

// settleQuiet is how long the reconcile count must stay unchanged, with an empty queue and no
// active worker, for the manager to count as settled.
const settleQuiet = 5 * time.Second

// waitSettled waits until the manager has reconciled at least n times since it started, its queue is
// empty, no worker is busy and the count has not moved for settleQuiet; it returns the time from
// since to the last change of the count (when the last reconcile ended).
func (m *managerProc) waitSettled(b *testing.B, n int, since time.Time) time.Duration {
	b.Helper()
	var last reconcileState
	var lastChange time.Time
	m.eventually(b, 30*time.Minute, "the manager to settle", func(ctx context.Context) (bool, string) {
		s, err := m.state(ctx)
		if err != nil {
			return false, err.Error()
		}
		now := time.Now()
		if s.reconciles != last.reconciles || lastChange.IsZero() {
			lastChange = now
		}
		last = s
		ok := s.reconciles >= float64(n) && s.depth == 0 && s.active == 0 && now.Sub(lastChange) >= settleQuiet
		return ok, fmt.Sprintf("%v reconciles (want %d), queue %v, active %v", s.reconciles, n, s.depth, s.active)
	})
	return lastChange.Sub(since)
}

// memory reads the manager's resident set (from /proc, the largest of six samples a second apart)
// and its Go heap (its metrics' allocated heap, the smallest of the samples: about the live heap after
// a collection), in MiB.
func (m *managerProc) memory(b *testing.B) (rss, heap float64) {
	b.Helper()
	got, err := procstat.Sample(m.proc.PID(), func() (float64, error) {
		text, err := m.metricsText(context.Background())
		return sum(text, "go_memstats_heap_alloc_bytes"), err
	})
	if err != nil {
		b.Fatal(err)
	}
	return got.RSS, got.Heap
}

// cpuSeconds is the manager's user and system CPU time so far.
func (m *managerProc) cpuSeconds(b *testing.B) float64 {
	b.Helper()
	return cpuSeconds(b, m.proc.PID())
}

// cpuSeconds is the user and system CPU time of process pid so far.
func cpuSeconds(b *testing.B, pid int) float64 {
	b.Helper()
	cpu, err := procstat.ReadCPUSeconds(pid)
	if err != nil {
		b.Fatal(err)
	}
	return cpu
}

// apiCounts is a snapshot of the API server's own counters: the manager's requests by flow schema
// (apiserver_flowcontrol_dispatched_requests_total) and every client's by verb and resource
// (apiserver_request_total, for the breakdown).
type apiCounts struct {
	schemas  map[string]float64
	requests map[string]float64 // "VERB resource[/subresource]" of non-dry-run requests
}

func (f *fixture) apiCounts(b *testing.B) apiCounts {
	b.Helper()
	text, err := f.env.APIServerMetrics(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	c := apiCounts{schemas: map[string]float64{}, requests: map[string]float64{}}
	for _, s := range flowSchemas {
		c.schemas[s.name] = sum(text, "apiserver_flowcontrol_dispatched_requests_total{", `flow_schema="`+s.name+`"`)
	}
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `dry_run=""`) {
			continue
		}
		labels := func(name string) string {
			_, rest, ok := strings.Cut(line, name+`="`)
			if !ok {
				return ""
			}
			v, _, _ := strings.Cut(rest, `"`)
			return v
		}
		key := labels("verb") + " " + labels("resource")
		if sub := labels("subresource"); sub != "" {
			key += "/" + sub
		}
		v, _ := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		c.requests[key] += v
	}
	return c
}

// delta is what the manager did between two snapshots.
type delta struct {
	creates, updates, patches, deletes, events, leases, reads float64
	others                                                    map[string]float64 // every client's writes by verb and resource
}

func (d delta) writes() float64 { return d.creates + d.updates + d.patches + d.deletes }
func (d delta) all() float64    { return d.writes() + d.events + d.leases + d.reads }

func (d delta) String() string {
	return fmt.Sprintf("manager: %v creates, %v updates, %v patches (applies), %v deletes, %v events, %v lease requests, %v reads; all clients' writes by verb and resource (API server): %v",
		d.creates, d.updates, d.patches, d.deletes, d.events, d.leases, d.reads, d.others)
}

func diff(before, after apiCounts) delta {
	d := func(s string) float64 { return after.schemas[s] - before.schemas[s] }
	out := delta{
		creates: d(fsCreate), updates: d(fsUpdate), patches: d(fsPatch), deletes: d(fsDelete),
		events: d(fsEvent), leases: d(fsLease), reads: d(fsRead) + d(fsReview), others: map[string]float64{},
	}
	for k, v := range after.requests {
		verb, _, _ := strings.Cut(k, " ")
		switch verb {
		case "POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION":
			if n := v - before.requests[k]; n > 0 && !strings.HasSuffix(k, "reviews") {
				out.others[k] = n
			}
		}
	}
	return out
}

// createNoise creates n unrelated ConfigMaps in the managed namespaces and n unrelated Secrets, half
// of them in the system namespace, about 1 KiB each and unlabelled.
func (f *fixture) createNoise(ctx context.Context, n int) error {
	blob := strings.Repeat("x", 1024)
	namespaces := f.namespaceNames()
	return parallel(f.size.parallel, 2*n, func(i int) error {
		if i%2 == 0 {
			return f.env.Client.Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: namespaces[i%len(namespaces)], Name: fmt.Sprintf("noise-%d", i)},
				Data:       map[string]string{"blob": blob},
			})
		}
		ns := "default"
		if i%4 == 1 {
			ns = testenv.SystemNamespace
		}
		return f.env.Client.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("noise-%d", i)},
			Data:       map[string][]byte{"blob": []byte(blob)},
		})
	})
}
