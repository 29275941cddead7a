// Command kubectl_complete-cos completes the command lines of kubectl cos: kubectl (1.26 and later)
// runs it with the words typed after `kubectl cos` to complete a plugin's arguments. It is the
// plugin's own completion (cobra's __complete), so the two always agree.
package main

import (
	"os"

	"github.com/cos-externalizer/cos-externalizer/cmd/kubectl-cos/cos"
)

func main() { os.Exit(cos.Main(append([]string{"__complete"}, os.Args[1:]...))) }
