package controlplane

import (
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeWebhookAdmission writes the AdmissionConfiguration (--admission-control-config-file) whose
// webhook admission plugins present the webhook client certificate to every webhook they call (the
// kubeconfig's user "*"), as "Authenticate apiservers" of Kubernetes' Dynamic Admission Control
// describes. It returns the configuration's path.
func writeWebhookAdmission(dir string, p *pki) (string, error) {
	kubeconfig := filepath.Join(dir, "webhook-admission-kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.AuthInfos["*"] = &clientcmdapi.AuthInfo{ClientCertificate: p.WebhookClientCert, ClientKey: p.WebhookClientKey}
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "admission-configuration.yaml")
	plugin := func(name string) string {
		return `- name: ` + name + `
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: "` + kubeconfig + `"
`
	}
	admission := "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n" +
		plugin("ValidatingAdmissionWebhook") + plugin("MutatingAdmissionWebhook")
	return path, os.WriteFile(path, []byte(admission), 0o600)
}
