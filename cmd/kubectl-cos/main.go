// Command kubectl-cos is the kubectl cos plugin: put it on PATH and run `kubectl cos`.
package main

import (
	"os"

	"github.com/cos-externalizer/cos-externalizer/cmd/kubectl-cos/cos"
)

func main() { os.Exit(cos.Main(os.Args[1:])) }
