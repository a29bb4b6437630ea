package main

import (
	"errors"
	"runtime/debug"
	"strings"

	// The peers this binary carries; each subcommand imports what it runs.
	_ "github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	_ "github.com/NVIDIA/k8s-device-plugin/api/config/v1"
	_ "github.com/NVIDIA/mig-parted/api/spec/v1"
	_ "k8s.io/kubernetes/pkg/kubelet/apis/config/validation"
)

func init() {
	register("versions", "(no arguments)", func(args []string) (any, error) {
		if len(args) != 0 {
			return nil, usagef("takes no arguments")
		}
		info, ok := debug.ReadBuildInfo()
		if !ok {
			return nil, errors.New("no build information in this binary")
		}
		versions := map[string]string{"go": info.GoVersion}
		for _, dep := range info.Deps {
			if strings.HasPrefix(dep.Path, "github.com/NVIDIA/") || strings.HasPrefix(dep.Path, "k8s.io/") ||
				strings.HasPrefix(dep.Path, "go.etcd.io/etcd/") {
				version := dep.Version
				if dep.Replace != nil {
					version = dep.Replace.Version
				}
				versions[dep.Path] = version
			}
		}
		return versions, nil
	})
}
