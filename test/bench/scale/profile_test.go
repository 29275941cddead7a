package scale_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/testenv"
)

// profileEnv names a directory: when set, every manager serves Go's profiling endpoints and
// BenchmarkScaleRestart writes there a CPU profile of the restart (from the start, COS_SCALE_CPU_SECONDS
// long, default 30) and a heap profile once settled, named by the fixture's size. Go's pprof reads them
// with the manager's binary (`go tool pprof -top bin/cos-externalizer heap-1000.pb.gz`).
const profileEnv = "COS_SCALE_PROFILE"

// startCPUProfile starts writing a CPU profile of m into the profile directory; the returned channel
// closes once it is written (at once when profiling is off).
func (f *fixture) startCPUProfile(b *testing.B, m *managerProc, name string) <-chan struct{} {
	done := make(chan struct{})
	if m.pprofPort == 0 {
		close(done)
		return done
	}
	seconds := envInt("COS_SCALE_CPU_SECONDS", 30)
	go func() {
		defer close(done)
		// The endpoint answers once the manager listens: retry until then.
		deadline := time.Now().Add(time.Minute)
		for {
			err := m.writeProfile(fmt.Sprintf("profile?seconds=%d", seconds), filepath.Join(os.Getenv(profileEnv), name), time.Duration(seconds+30)*time.Second)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				b.Logf("CPU profile: %v", err)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return done
}

// writeHeapProfile writes m's heap profile (after a collection) into the profile directory.
func (f *fixture) writeHeapProfile(b *testing.B, m *managerProc, name string) {
	b.Helper()
	if m.pprofPort == 0 {
		return
	}
	if err := m.writeProfile("heap?gc=1", filepath.Join(os.Getenv(profileEnv), name), time.Minute); err != nil {
		b.Logf("heap profile: %v", err)
	}
}

// writeProfile fetches /debug/pprof/<what> of m into path.
func (m *managerProc) writeProfile(what, path string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(m.pprofPort)+"/debug/pprof/"+what, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", what, resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, resp.Body); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// loadAverage is the machine's load averages over 1, 5 and 15 minutes (/proc/loadavg), for the
// figures' context: the benchmarks share the machine's cores with whatever else runs.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	fields := strings.Fields(string(raw))
	if len(fields) < 3 {
		return "unknown"
	}
	return strings.Join(fields[:3], " ")
}

// dumpSamples writes, with COS_SCALE_PROFILE set, the fixture's first owner's objects as the API
// server returns them (its Active and first Archived ClusterObjectSet, the object-data Secret of the
// Active one, without data, and the first ServiceAccount and ConfigMap), to see what the caches hold.
func (f *fixture) dumpSamples(ctx context.Context, b *testing.B) {
	b.Helper()
	dir := os.Getenv(profileEnv)
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	active, archived := f.revision(0, f.size.revisions), f.revision(0, 1)
	sample := func(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		if err := f.env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
			b.Logf("sample %s %s: %v", kind, name, err)
			return nil
		}
		return u
	}
	objs := map[string]*unstructured.Unstructured{
		"cos-active":   sample(olmv1.GroupVersion.String(), olmv1.ClusterObjectSetKind, "", active.Name),
		"cos-archived": sample(olmv1.GroupVersion.String(), olmv1.ClusterObjectSetKind, "", archived.Name),
	}
	if cos := objs["cos-active"]; cos != nil {
		phases, _, _ := unstructured.NestedSlice(cos.Object, "spec", "phases")
		if len(phases) > 0 {
			if list, _, _ := unstructured.NestedSlice(phases[0].(map[string]any), "objects"); len(list) > 0 {
				name, _, _ := unstructured.NestedString(list[0].(map[string]any), "ref", "name")
				if sec := sample("v1", "Secret", testenv.SystemNamespace, name); sec != nil {
					unstructured.RemoveNestedField(sec.Object, "data")
					objs["secret"] = sec
				}
			}
		}
	}
	for _, p := range active.Spec.Phases {
		o := p.Objects[0].Object
		objs[strings.ToLower(o.GetKind())] = sample(o.GetAPIVersion(), o.GetKind(), o.GetNamespace(), o.GetName())
	}
	for name, u := range objs {
		if u == nil {
			continue
		}
		raw, err := json.MarshalIndent(u.Object, "", "  ")
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "sample-"+name+".json"), raw, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}
