// Command kubectl-cos is the kubectl cos plugin: put it on PATH and run `kubectl cos`. Run through a
// link named kubectl_complete-cos, it is the plugin's completion for kubectl (as kubectl_complete-cos
// is): where only one program of the plugin is installed (krew), a link next to it completes.
package main

// client-go's auth providers are imported as krew's plugin guide asks: a kubeconfig with an
// auth-provider (OIDC; azure and gcp are stubs that name their exec plugins) works with kubectl cos as
// with kubectl. Exec plugins need no import.
import (
	"os"
	"path/filepath"
	"strings"

	"github.com/cos-externalizer/cos-externalizer/cmd/kubectl-cos/commands"

	_ "k8s.io/client-go/plugin/pkg/client/auth"
)

func main() {
	if strings.TrimSuffix(filepath.Base(os.Args[0]), ".exe") == "kubectl_complete-cos" {
		os.Exit(commands.Main(append([]string{"__complete"}, os.Args[1:]...)))
	}
	os.Exit(commands.Main(os.Args[1:]))
}
