package main

// kubelet-config: the configuration a kubelet started with these flags runs with, as its
// /configz endpoint serves it.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"k8s.io/component-base/configz"
	"k8s.io/klog/v2"
	"k8s.io/utils/cpuset"
)

func init() {
	register("kubelet-config", "--config F [--config-dir D] [--machine MACHINE.json] [KUBELET FLAGS...]",
		func(args []string) (any, error) {
			own, kubeletFlags, err := kubeletArgs(args, "machine")
			if err != nil {
				return nil, err
			}
			if err := asCgroupV2Node(); err != nil {
				return nil, err
			}
			if !namesFlag(kubeletFlags, "--config") {
				return nil, usagef("--config is required")
			}
			ctx := context.Background()
			loaded, err := loadKubelet(ctx, kubeletFlags)
			if err != nil {
				return nil, err
			}
			body, _, err := configzAnswer(ctx, loaded, lastValue(own, "machine"))
			if err != nil {
				return nil, err
			}
			return body, nil
		})
}

func namesFlag(args []string, flag string) bool {
	for _, arg := range args {
		if arg == flag || len(arg) > len(flag) && arg[:len(flag)+1] == flag+"=" {
			return true
		}
	}
	return false
}

// configzAnswer registers the loaded configuration with configz as run() does, applies the
// reserved-CPU rewrite that run() makes afterwards, and returns what GET /configz answers then,
// with the reserved CPU set. Without a machine the reserved CPUs are parsed but not checked
// against the machine's CPUs.
func configzAnswer(ctx context.Context, loaded *loadedKubelet, machinePath string) (json.RawMessage, cpuset.CPUSet, error) {
	logger := klog.FromContext(ctx)
	kc := loaded.config
	versioned, err := convertToVersionedKubeletConfig(kc)
	if err != nil {
		return nil, cpuset.New(), err
	}
	cz, err := configz.New("kubeletconfig")
	if err != nil {
		return nil, cpuset.New(), err
	}
	if err := cz.Set(versioned); err != nil {
		return nil, cpuset.New(), err
	}
	var reserved cpuset.CPUSet
	if machinePath != "" {
		machine, err := readMachine(machinePath)
		if err != nil {
			return nil, cpuset.New(), err
		}
		if reserved, err = getReservedCPUs(logger, machine, kc.ReservedSystemCPUs); err != nil {
			return nil, cpuset.New(), err
		}
	} else if reserved, err = cpuset.Parse(kc.ReservedSystemCPUs); err != nil {
		return nil, cpuset.New(), fmt.Errorf("unable to parse reserved-cpus list: %s", err)
	}
	rewriteReservedCPUs(kc, reserved)

	mux := http.NewServeMux()
	configz.InstallHandler(mux)
	recorder := httptest.NewRecorder()
	mux.ServeHTTP(recorder, httptest.NewRequest(http.MethodGet, "/configz", nil))
	if recorder.Code != http.StatusOK {
		return nil, reserved, fmt.Errorf("/configz answered %d: %s", recorder.Code, recorder.Body.String())
	}
	return json.RawMessage(recorder.Body.Bytes()), reserved, nil
}
