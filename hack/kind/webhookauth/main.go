// Command webhookauth writes what the kind e2e cluster's API server needs to authenticate to the
// manager's webhooks (docs/e2e.md, docs/security.md "Webhook callers"): a CA of its own, a client
// certificate it signed for kube-apiserver, and the AdmissionConfiguration whose webhook plugins
// present that certificate (a kubeConfigFile), into one folder that the kind cluster config mounts
// into the control-plane node at -node-dir:
//
//	ca.crt                         the client CA: the manager's --webhook-client-ca bundle
//	client.crt, client.key         kube-apiserver's client certificate and key
//	webhook-kubeconfig             one user per webhook Service host of -user; paths under -node-dir
//	admission-configuration.yaml   kube-apiserver's --admission-control-config-file
//
// The CA's key is not kept: nothing issues a second certificate. An existing CA and certificate are
// kept while they are valid, chain and are not about to expire, so a running cluster keeps
// matching the folder; otherwise both are made anew (a cluster created before must then be
// recreated: kind delete cluster).
//
//	go run ./hack/kind/webhookauth -dir .local/kind-webhook-auth
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cos-externalizer/cos-externalizer/certs"
)

// File names inside the folder (and inside the node, under -node-dir).
const (
	CAFile         = "ca.crt"
	ClientCertFile = "client.crt"
	ClientKeyFile  = "client.key"
	KubeconfigFile = "webhook-kubeconfig"
	AdmissionFile  = "admission-configuration.yaml"
)

// Defaults: the node folder docs/security.md uses, the kubeconfig user the API server picks for every
// webhook it calls through a Service, in any namespace ("*.svc": it looks up service.namespace.svc,
// then *.namespace.svc, then *.svc), so the manager's webhooks, wherever it is installed, get the
// certificate (config/default's olmv1-system, the README's Helm release in cos-system, any other), and
// the client certificate's common name (the local control plane's, test/controlplane.WebhookClientName).
// Another webhook called through a Service gets the certificate too: it proves the API server's identity
// only to whoever holds the CA (the key stays in the node); a webhook called by URL gets none.
const (
	DefaultNodeDir    = "/etc/kubernetes/admission"
	DefaultUser       = "*.svc"
	DefaultClientName = "kube-apiserver-webhook-client"
)

// DefaultUsers are the kubeconfig users written when -user is not given.
var DefaultUsers = []string{DefaultUser}

const (
	caValidFor     = 10 * 365 * 24 * time.Hour
	clientValidFor = 365 * 24 * time.Hour
	// renewBefore: a certificate that expires sooner is made anew.
	renewBefore = 30 * 24 * time.Hour
)

// Options says what to write.
type Options struct {
	Dir        string   // the folder on this machine
	NodeDir    string   // where the folder is mounted in the control-plane node
	Users      []string // the kubeconfig users: webhook hosts, or "*" for every webhook
	ClientName string   // common name of the client certificate
	Now        time.Time
}

func main() {
	o := Options{Now: time.Now()}
	flag.StringVar(&o.Dir, "dir", ".local/kind-webhook-auth", "folder to write (made if missing)")
	flag.StringVar(&o.NodeDir, "node-dir", DefaultNodeDir, "absolute path at which the kind cluster config mounts -dir into the control-plane node")
	users := flag.String("user", strings.Join(DefaultUsers, ","), `kubeconfig users the API server picks for the webhooks, comma-separated: "<service>.<namespace>.svc" (one per namespace the manager is installed in), or "*" for every webhook it calls`)
	flag.StringVar(&o.ClientName, "client-name", DefaultClientName, "common name of kube-apiserver's client certificate")
	flag.Parse()
	for u := range strings.SplitSeq(*users, ",") {
		if u = strings.TrimSpace(u); u != "" {
			o.Users = append(o.Users, u)
		}
	}
	made, err := Write(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "webhookauth:", err)
		os.Exit(1)
	}
	if made {
		fmt.Printf("webhookauth: new client CA and certificate in %s\n", o.Dir)
	}
}

// Write writes the folder. It reports whether it made a new CA and certificate (false: the
// existing ones were kept).
func Write(o Options) (made bool, err error) {
	if !path.IsAbs(o.NodeDir) {
		return false, fmt.Errorf("-node-dir %q: must be absolute (the API server reads it inside the node)", o.NodeDir)
	}
	if len(o.Users) == 0 || slices.Contains(o.Users, "") || o.ClientName == "" {
		return false, errors.New("-user and -client-name must not be empty")
	}
	// The node's container runtime mounts the folder; its kube-apiserver runs as root and reads it.
	if err := os.MkdirAll(o.Dir, 0o755); err != nil { //nolint:gosec // mounted into the node; the key file itself is 0600
		return false, err
	}
	if reason := check(o); reason != nil {
		if err := issue(o); err != nil {
			return false, err
		}
		made = true
	}
	if err := writeConfigs(o); err != nil {
		return made, err
	}
	return made, check(o)
}

// check says why the CA and certificate in the folder cannot be kept, or nil.
func check(o Options) error {
	caPEM, err := os.ReadFile(filepath.Join(o.Dir, CAFile))
	if err != nil {
		return err
	}
	cas, err := certs.ParseCerts(caPEM)
	if err != nil {
		return err
	}
	if len(cas) != 1 {
		return fmt.Errorf("%s holds %d certificates, want 1", CAFile, len(cas))
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(o.Dir, ClientCertFile), filepath.Join(o.Dir, ClientKeyFile))
	if err != nil {
		return err
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return err
	}
	if leaf.Subject.CommonName != o.ClientName {
		return fmt.Errorf("the client certificate is for %q, want %q", leaf.Subject.CommonName, o.ClientName)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cas[0])
	// As the manager verifies it (tls.RequireAndVerifyClientCert), at renewBefore from now.
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: o.Now.Add(renewBefore),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return fmt.Errorf("the client certificate, %s from now: %w", renewBefore, err)
	}
	return nil
}

// issue makes a new CA and a client certificate it signed.
func issue(o Options) error {
	ca, err := certs.NewCA("cos-externalizer-kind-webhook-client-ca", caValidFor, o.Now)
	if err != nil {
		return err
	}
	cert, key, err := ca.Issue(certs.Leaf{CommonName: o.ClientName, Usage: x509.ExtKeyUsageClientAuth, ValidFor: clientValidFor, Now: o.Now})
	if err != nil {
		return err
	}
	// The key first, the CA last: an interrupted run leaves a pair check refuses.
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{{ClientKeyFile, key, 0o600}, {ClientCertFile, cert, 0o644}, {CAFile, ca.PEM, 0o644}} {
		if err := writeFile(filepath.Join(o.Dir, f.name), f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
}

// writeConfigs writes the kubeconfig and the AdmissionConfiguration, with the node's paths: every
// user presents the same certificate.
func writeConfigs(o Options) error {
	cfg := clientcmdapi.NewConfig()
	for _, u := range o.Users {
		cfg.AuthInfos[u] = &clientcmdapi.AuthInfo{
			ClientCertificate: path.Join(o.NodeDir, ClientCertFile),
			ClientKey:         path.Join(o.NodeDir, ClientKeyFile),
		}
	}
	kubeconfig, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(o.Dir, KubeconfigFile), kubeconfig, 0o644); err != nil {
		return err
	}
	return writeFile(filepath.Join(o.Dir, AdmissionFile), AdmissionConfiguration(path.Join(o.NodeDir, KubeconfigFile)), 0o644)
}

// AdmissionConfiguration is kube-apiserver's --admission-control-config-file: both webhook admission
// plugins take their client credentials from kubeconfig.
func AdmissionConfiguration(kubeconfig string) []byte {
	var b bytes.Buffer
	b.WriteString("apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n")
	for _, plugin := range []string{"ValidatingAdmissionWebhook", "MutatingAdmissionWebhook"} {
		fmt.Fprintf(&b, "- name: %s\n  configuration:\n    apiVersion: apiserver.config.k8s.io/v1\n    kind: WebhookAdmissionConfiguration\n    kubeConfigFile: %q\n", plugin, kubeconfig)
	}
	return b.Bytes()
}

// writeFile replaces name with data, through a temporary file and a rename (the node mounts the
// folder, not the files, so it sees the new file); a file that already holds data is left as it is.
func writeFile(name string, data []byte, mode os.FileMode) error {
	if old, err := os.ReadFile(name); err == nil && bytes.Equal(old, data) {
		return os.Chmod(name, mode)
	}
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil { // WriteFile's mode is masked by the umask
		return err
	}
	return os.Rename(tmp, name)
}
