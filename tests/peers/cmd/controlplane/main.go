// Command controlplane runs a Kubernetes control plane of one release for the cluster-side
// tests: embedded etcd, kube-apiserver, kube-controller-manager and kube-scheduler, each the
// upstream component built from k8s.io/kubernetes (the release go.mod pins) and started with
// the flags a kubeadm cluster gives it. Test infrastructure, never shipped.
//
//	controlplane up --dir DIR           certificates, kubeconfigs, every component; prints one
//	                                    JSON line when the cluster serves, runs until SIGTERM,
//	                                    SIGINT or (with --stdin-lifeline) EOF on stdin
//	controlplane kube-apiserver ARGS    one component, as its own upstream command line
//	controlplane kube-controller-manager ARGS
//	controlplane kube-scheduler ARGS
//
// `up` starts the three Kubernetes components as child processes of this same binary (each
// with its own flags, metrics registry and feature gates, as on a real control plane node) and
// etcd inside its own process.
package main

import (
	"fmt"
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // the components' --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as upstream's main packages
	_ "k8s.io/component-base/metrics/prometheus/version"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func usage() {
	fmt.Fprintln(os.Stderr, "usage: controlplane up --dir DIR [--stdin-lifeline] [--ready-timeout SECONDS]")
	fmt.Fprintln(os.Stderr, "       controlplane kube-apiserver|kube-controller-manager|kube-scheduler ARGS...")
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "up":
		os.Exit(up(args))
	case "kube-apiserver":
		command := apiserver.NewAPIServerCommand()
		command.SetArgs(args)
		os.Exit(cli.Run(command))
	case "kube-controller-manager":
		command := controllermanager.NewControllerManagerCommand()
		command.SetArgs(args)
		os.Exit(cli.Run(command))
	case "kube-scheduler":
		command := scheduler.NewSchedulerCommand()
		command.SetArgs(args)
		os.Exit(cli.Run(command))
	default:
		usage()
		os.Exit(2)
	}
}
