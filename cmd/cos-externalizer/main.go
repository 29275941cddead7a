// Command cos-externalizer is the manager: it serves health and readiness probes and Prometheus
// metrics, and hosts the externalizing webhook and the companion reconciler of ClusterObjectSets.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/go-logr/zapr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cos-externalizer/cos-externalizer/cmd/cos-externalizer/app"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == app.UninstallCommand {
		os.Exit(app.UninstallMain(os.Args[2:]))
	}
	var o app.Options
	o.Bind(flag.CommandLine)
	version := flag.Bool("version", false, "Print the version and exit.")
	flag.Parse()
	if *version {
		fmt.Println("cos-externalizer", app.Version)
		return
	}
	if err := o.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	zl, err := app.NewLogger(&o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	log := zapr.NewLogger(zl)
	ctrl.SetLogger(log)
	klog.SetLogger(log)
	setupLog := log.WithName("setup")

	cfg, err := ctrl.GetConfig()
	if err != nil {
		setupLog.Error(err, "loading the kubeconfig")
		os.Exit(1)
	}
	if err := app.Run(ctrl.SetupSignalHandler(), cfg, &o); err != nil {
		setupLog.Error(err, "manager stopped")
		_ = zl.Sync()
		os.Exit(1)
	}
	_ = zl.Sync()
}
