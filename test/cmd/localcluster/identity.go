package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/test/controlplane"
)

const (
	// managerServiceAccount is the manager's ServiceAccount in config/rbac.
	managerServiceAccount = "cos-externalizer"
	// managerTokenLifetime is how long the manager's token asks to be valid: a working session.
	managerTokenLifetime = 7 * 24 * time.Hour
	// rbacFieldManager applies config/rbac.
	rbacFieldManager = "localcluster"
)

// managerUser is the manager's username under `run`: its ServiceAccount's.
var managerUser = "system:serviceaccount:" + olmv1.DefaultSystemNamespace + ":" + managerServiceAccount

// rbacOverlays are the parts of config/ that give the manager its identity and permissions, as
// config/default installs them: the ServiceAccount and its least-privilege roles, and the rule a
// manager that rolls out needs.
var rbacOverlays = []string{"config/rbac", "config/rbac/rollout"}

// managerIdentity gives the manager of `run` its own identity on the local control plane: it applies
// the ServiceAccount and RBAC of config/rbac and config/rbac/rollout, requests a token for the
// ServiceAccount (TokenRequest) and writes a kubeconfig with it to path. The manager then runs with
// exactly the permissions it has when deployed, and its Secret guard exempts it, not the person
// using the admin kubeconfig.
func managerIdentity(ctx context.Context, cp *controlplane.ControlPlane, path string) (expires time.Time, err error) {
	if err := controlplane.EnsureNamespace(ctx, cp.Config, olmv1.DefaultSystemNamespace); err != nil {
		return time.Time{}, err
	}
	c, err := client.New(cp.Config, client.Options{})
	if err != nil {
		return time.Time{}, err
	}
	for _, overlay := range rbacOverlays {
		objs, err := render(overlay)
		if err != nil {
			return time.Time{}, err
		}
		for _, u := range objs {
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(rbacFieldManager), client.ForceOwnership); err != nil {
				return time.Time{}, fmt.Errorf("applying %s %s of %s: %w", u.GetKind(), u.GetName(), overlay, err)
			}
		}
	}
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return time.Time{}, err
	}
	seconds := int64(managerTokenLifetime / time.Second)
	tr, err := cs.CoreV1().ServiceAccounts(olmv1.DefaultSystemNamespace).CreateToken(ctx, managerServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	if err != nil {
		return time.Time{}, fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", olmv1.DefaultSystemNamespace, managerServiceAccount, err)
	}
	if err := writeTokenKubeconfig(path, cp.Config, tr.Status.Token); err != nil {
		return time.Time{}, err
	}
	return tr.Status.ExpirationTimestamp.Time, nil
}

// writeTokenKubeconfig writes a kubeconfig for the API server of admin that authenticates with token.
func writeTokenKubeconfig(path string, admin *rest.Config, token string) error {
	caData := admin.CAData
	if len(caData) == 0 && admin.CAFile != "" {
		b, err := os.ReadFile(admin.CAFile)
		if err != nil {
			return err
		}
		caData = b
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: caData}
	cfg.AuthInfos[managerServiceAccount] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["manager"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: managerServiceAccount}
	cfg.CurrentContext = "manager"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*cfg, path)
}

// render is `kubectl kustomize` of a folder of the repository, parsed.
func render(overlay string) ([]*unstructured.Unstructured, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return nil, err
	}
	kubectl, err := controlplane.Binary("kubectl")
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd := exec.Command(kubectl, "kustomize", filepath.Join(root, overlay))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kubectl kustomize %s: %w: %s", overlay, err, stderr.String())
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("kubectl kustomize %s: %w", overlay, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}
