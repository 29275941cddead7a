package main

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apiserver/pkg/admission"
	webhookconfig "k8s.io/apiserver/pkg/admission/plugin/webhook/config"
	apiserverapi "k8s.io/apiserver/pkg/apis/apiserver"
	apiserverapiv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	utilwebhook "k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cos-externalizer/cos-externalizer/certs"
	"github.com/cos-externalizer/cos-externalizer/webhook/server"
)

var webhookPlugins = []string{"ValidatingAdmissionWebhook", "MutatingAdmissionWebhook"}

// TestTheAPIServerAuthenticatesToTheManager reads the folder as kube-apiserver does (its
// --admission-control-config-file, each webhook plugin's kubeConfigFile, the client configuration
// for the webhook Service), and calls a server that verifies callers as the manager does with
// --webhook-client-ca=ca.crt: the API server's call is served, a call without the certificate is
// refused at the handshake.
func TestTheAPIServerAuthenticatesToTheManager(t *testing.T) {
	dir := t.TempDir()
	// The node path is the folder itself, so the API server's code can follow every path here.
	o := Options{Dir: dir, NodeDir: dir, Users: DefaultUsers, ClientName: DefaultClientName, Now: time.Now()}
	made, err := Write(o)
	if err != nil {
		t.Fatal(err)
	}
	if !made {
		t.Fatal("a new folder: want a new CA and certificate")
	}

	scheme := runtime.NewScheme()
	utilruntime.Must(apiserverapi.AddToScheme(scheme))
	utilruntime.Must(apiserverapiv1.AddToScheme(scheme))
	provider, err := admission.ReadAdmissionConfiguration(webhookPlugins, filepath.Join(dir, AdmissionFile), scheme)
	if err != nil {
		t.Fatal(err)
	}
	var cfg *rest.Config
	for _, plugin := range webhookPlugins {
		r, err := provider.ConfigFor(plugin)
		if err != nil {
			t.Fatal(err)
		}
		wc, err := webhookconfig.LoadConfig(r)
		if err != nil {
			t.Fatalf("%s: %v", plugin, err)
		}
		if want := filepath.Join(dir, KubeconfigFile); wc.KubeConfigFile != want {
			t.Fatalf("%s: kubeConfigFile %q, want %q", plugin, wc.KubeConfigFile, want)
		}
		resolver, err := utilwebhook.NewDefaultAuthenticationInfoResolver(wc.KubeConfigFile)
		if err != nil {
			t.Fatal(err)
		}
		// The webhooks' clientConfig: Service cos-externalizer-webhook, port 443, of config/default's
		// namespace, of the README's Helm release and of any other namespace.
		for _, ns := range []string{"olmv1-system", "cos-system", "team-a"} {
			cfg, err = resolver.ClientConfigForService("cos-externalizer-webhook", ns, 443)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.CertFile != filepath.Join(dir, ClientCertFile) || cfg.KeyFile != filepath.Join(dir, ClientKeyFile) {
				t.Fatalf("%s, namespace %s: the API server would present %q/%q, want the folder's client certificate", plugin, ns, cfg.CertFile, cfg.KeyFile)
			}
		}
		// A webhook called by URL gets no certificate of ours.
		other, err := resolver.ClientConfigFor("webhook.example.com:443")
		if err != nil {
			t.Fatal(err)
		}
		if other.CertFile != "" {
			t.Errorf("%s: a webhook called by URL is sent %q", plugin, other.CertFile)
		}
	}

	addr := serveAsTheManager(t, filepath.Join(dir, CAFile))
	withCert, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	withCert.InsecureSkipVerify = true //nolint:gosec // the caller's certificate is under test, not the server's
	if err := call(addr, withCert); err != nil {
		t.Errorf("the API server's call: %v", err)
	}
	if err := call(addr, &tls.Config{InsecureSkipVerify: true}); err == nil { //nolint:gosec // as above
		t.Error("a call without a client certificate was served")
	}
	if key, err := os.Stat(filepath.Join(dir, ClientKeyFile)); err != nil || key.Mode().Perm() != 0o600 {
		t.Errorf("the client key's mode: %v (%v), want 0600", key.Mode().Perm(), err)
	}
}

// TestWriteKeepsWhatIsValid: a second run changes nothing (a running cluster keeps matching); a
// certificate about to expire, or of another name, is made anew.
func TestWriteKeepsWhatIsValid(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	o := Options{Dir: dir, NodeDir: DefaultNodeDir, Users: DefaultUsers, ClientName: DefaultClientName, Now: now}
	if _, err := Write(o); err != nil {
		t.Fatal(err)
	}
	before := read(t, dir)
	made, err := Write(o)
	if err != nil || made {
		t.Fatalf("second run: made %v, %v; want the folder kept", made, err)
	}
	if after := read(t, dir); !equal(before, after) {
		t.Error("a second run changed the folder")
	}
	kubeconfig, err := clientcmd.Load(before[KubeconfigFile])
	if err != nil {
		t.Fatal(err)
	}
	if user := kubeconfig.AuthInfos[DefaultUser]; len(kubeconfig.AuthInfos) != 1 || user == nil || user.ClientCertificate != "/etc/kubernetes/admission/client.crt" {
		t.Errorf("the kubeconfig does not give user %q the node's paths:\n%s", DefaultUser, before[KubeconfigFile])
	}

	o.Now = now.Add(clientValidFor - renewBefore/2)
	if made, err := Write(o); err != nil || !made {
		t.Fatalf("a certificate about to expire: made %v, %v; want a new one", made, err)
	}
	o.ClientName = "another"
	if made, err := Write(o); err != nil || !made {
		t.Fatalf("another name: made %v, %v; want a new certificate", made, err)
	}
	if after := read(t, dir); equal(before, after) {
		t.Error("the folder did not change")
	}

	if err := os.WriteFile(filepath.Join(dir, ClientKeyFile), []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if made, err := Write(o); err != nil || !made {
		t.Fatalf("a broken key: made %v, %v; want a new pair", made, err)
	}

	if _, err := Write(Options{Dir: dir, NodeDir: "admission", Users: DefaultUsers, ClientName: DefaultClientName, Now: now}); err == nil {
		t.Error("a relative node path was taken")
	}
}

// serveAsTheManager serves HTTPS on a loopback port with the manager's client verification
// (server.ClientCA over the bundle at caFile) and returns its address.
func serveAsTheManager(t *testing.T, caFile string) string {
	t.Helper()
	ca, err := server.NewClientCA(caFile, server.ClientCAOptions{Names: []string{DefaultClientName}})
	if err != nil {
		t.Fatal(err)
	}
	serving, err := certs.Generate([]string{"127.0.0.1"}, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(serving.Cert, serving.Key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	ca.TLSOption()(cfg)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "served") }),
		ReadHeaderTimeout: 5 * time.Second,
	}
	go func() { _ = srv.Serve(tls.NewListener(l, cfg)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

// call sends one request and wants the server's answer.
func call(addr string, cfg *tls.Config) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+"/validate", nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if string(body) != "served" {
		return errors.New("unexpected answer: " + string(body))
	}
	return nil
}

func read(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, name := range []string{CAFile, ClientCertFile, ClientKeyFile, KubeconfigFile, AdmissionFile} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = data
	}
	return out
}

func equal(a, b map[string][]byte) bool {
	for k, v := range a {
		if string(b[k]) != string(v) {
			return false
		}
	}
	return len(a) == len(b)
}
