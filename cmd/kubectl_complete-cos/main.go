// Command kubectl_complete-cos completes the command lines of kubectl cos: kubectl (1.26 and later)
// runs it with the words typed after `kubectl cos` when it completes a plugin's arguments. It runs
// `kubectl-cos __complete` (cobra's completion) with them, so the two always agree: kubectl-cos is
// looked for beside this program first, then on PATH.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

func main() {
	bin := "kubectl-cos"
	if self, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(self), bin); isFile(p) {
			bin = p
		}
	}
	cmd := exec.Command(bin, append([]string{"__complete"}, os.Args[1:]...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.ExitCode())
		}
		fmt.Fprintln(os.Stderr, "kubectl_complete-cos:", err)
		os.Exit(1)
	}
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
