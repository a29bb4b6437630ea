package main

// kubelet-checkpoint: whether a kubelet with this configuration, on this machine, starts with
// the cpu_manager_state and memory_manager_state it finds in its root directory, and the
// checkpoints it leaves there. The container manager's part of the start-up
// (pkg/kubelet/cm.NewContainerManager and containerManagerImpl.Start, k8s.io/kubernetes
// v1.37.2): the Topology Manager, then the CPU and Memory Managers are created and started on
// the checkpoint files, with no pods running.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/kubelet/cadvisor"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/state"
	"k8s.io/kubernetes/pkg/kubelet/cm/memorymanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/eviction"
	evictionapi "k8s.io/kubernetes/pkg/kubelet/eviction/api"
	"k8s.io/utils/cpuset"
)

// The file names the kubelet's managers use (pkg/kubelet/cm/cpumanager/cpu_manager.go,
// pkg/kubelet/cm/memorymanager/memory_manager.go).
var checkpointFiles = []string{"cpu_manager_state", "memory_manager_state"}

func init() {
	register("kubelet-checkpoint",
		"--config F [--config-dir D] --state-dir D --machine MACHINE.json [--assign POD/CONTAINER=CPUS]... [KUBELET FLAGS...]",
		func(args []string) (any, error) {
			own, kubeletFlags, err := kubeletArgs(args, "state-dir", "machine", "assign")
			if err != nil {
				return nil, err
			}
			if err := asCgroupV2Node(); err != nil {
				return nil, err
			}
			stateDir, machine := lastValue(own, "state-dir"), lastValue(own, "machine")
			if !namesFlag(kubeletFlags, "--config") || stateDir == "" || machine == "" {
				return nil, usagef("--config, --state-dir and --machine are required")
			}
			assignments, err := parseAssignments(own["assign"])
			if err != nil {
				return nil, err
			}
			return startManagers(context.Background(), kubeletFlags, stateDir, machine, assignments)
		})
}

// sourcesNotReady keeps the CPU manager's reconcile loop from removing state: no pod source
// has answered yet, as at the kubelet's start.
type sourcesNotReady struct{}

func (sourcesNotReady) AddSource(string) {}
func (sourcesNotReady) AllReady() bool   { return false }

func noPods() []*v1.Pod { return nil }

// assignment is a container that holds CPUs exclusively: what the static policy records for a
// Guaranteed pod's container with integer CPUs.
type assignment struct {
	pod, container string
	cpus           cpuset.CPUSet
}

// parseAssignments reads --assign POD/CONTAINER=CPUS options.
func parseAssignments(values []string) ([]assignment, error) {
	var result []assignment
	for _, value := range values {
		ref, cpus, found := strings.Cut(value, "=")
		pod, container, named := strings.Cut(ref, "/")
		if !found || !named || pod == "" || container == "" {
			return nil, usagef("--assign takes POD/CONTAINER=CPUS, got %q", value)
		}
		set, err := cpuset.Parse(cpus)
		if err != nil || set.IsEmpty() {
			return nil, usagef("--assign %s: %q is not a CPU set", ref, cpus)
		}
		result = append(result, assignment{pod: pod, container: container, cpus: set})
	}
	return result, nil
}

func startManagers(ctx context.Context, kubeletFlags []string, stateDir, machinePath string, assignments []assignment) (any, error) {
	result, workDir, err := startManagersOnCopy(ctx, kubeletFlags, stateDir, machinePath, assignments)
	if err != nil && workDir != "" {
		// The kubelet names its state directory in its errors; say the one given.
		err = errors.New(strings.ReplaceAll(err.Error(), workDir, filepath.Clean(stateDir)))
	}
	return result, err
}

func startManagersOnCopy(ctx context.Context, kubeletFlags []string, stateDir, machinePath string, assignments []assignment) (any, string, error) {
	logger := klog.FromContext(ctx)
	workDir := ""
	loaded, err := loadKubelet(ctx, kubeletFlags)
	if err != nil {
		return nil, workDir, err
	}
	machine, err := readMachine(machinePath)
	if err != nil {
		return nil, workDir, err
	}
	configzBody, reservedSystemCPUs, err := configzAnswer(ctx, loaded, machinePath)
	if err != nil {
		return nil, workDir, err
	}
	// The managers write their checkpoints; they work on a copy so the input stays as it was.
	workDir, err = os.MkdirTemp("", "kubelet-checkpoint-")
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(workDir)
	before := map[string]any{}
	for _, name := range checkpointFiles {
		text, err := copyCheckpoint(filepath.Join(stateDir, name), filepath.Join(workDir, name))
		if err != nil {
			return nil, workDir, err
		}
		before[name] = text
	}

	s := loaded.config
	kubeReserved, err := parseResourceList(s.KubeReserved)
	if err != nil {
		return nil, workDir, fmt.Errorf("--kube-reserved value failed to parse: %w", err)
	}
	systemReserved, err := parseResourceList(s.SystemReserved)
	if err != nil {
		return nil, workDir, fmt.Errorf("--system-reserved value failed to parse: %w", err)
	}
	var hardEvictionThresholds []evictionapi.Threshold
	if !loaded.flags.ExperimentalNodeAllocatableIgnoreEvictionThreshold {
		hardEvictionThresholds, err = eviction.ParseThresholdConfig([]string{}, s.EvictionHard, nil, nil, nil)
		if err != nil {
			return nil, workDir, err
		}
	}
	var topologyManagerPolicyOptions map[string]string
	if utilfeature.DefaultFeatureGate.Enabled(features.TopologyManagerPolicyOptions) {
		topologyManagerPolicyOptions = s.TopologyManagerPolicyOptions
	} else if s.TopologyManagerPolicyOptions != nil {
		return nil, workDir, fmt.Errorf("topology manager policy options %v require feature gates %q enabled",
			s.TopologyManagerPolicyOptions, features.TopologyManagerPolicyOptions)
	}

	reservation := nodeAllocatableReservation(cadvisor.CapacityFromMachineInfo(machine),
		kubeReserved, systemReserved, hardEvictionThresholds)
	topologyManager, err := topologymanager.NewManager(logger, machine.Topology, s.TopologyManagerPolicy,
		s.TopologyManagerScope, topologyManagerPolicyOptions)
	if err != nil {
		return nil, workDir, err
	}
	cpuManager, err := cpumanager.NewManager(logger, s.CPUManagerPolicy, s.CPUManagerPolicyOptions,
		s.CPUManagerReconcilePeriod.Duration, machine, reservedSystemCPUs, reservation, workDir, topologyManager)
	if err != nil {
		return nil, workDir, err
	}
	memoryManager, err := memorymanager.NewManager(logger, s.MemoryManagerPolicy, machine, reservation,
		s.ReservedMemory, workDir, topologyManager)
	if err != nil {
		return nil, workDir, err
	}
	// containerManagerImpl.Start: the CPU manager first, then the memory manager.
	if err := cpuManager.Start(ctx, cpumanager.ActivePodsFunc(noPods), sourcesNotReady{}, nil, nil,
		containermap.NewContainerMap()); err != nil {
		return nil, workDir, fmt.Errorf("start cpu manager error: %w", err)
	}
	if err := memoryManager.Start(ctx, memorymanager.ActivePodsFunc(noPods), sourcesNotReady{}, nil, nil,
		containermap.NewContainerMap()); err != nil {
		return nil, workDir, fmt.Errorf("start memory manager error: %w", err)
	}

	// Pods that then run: each assignment goes through the CPU manager's own checkpoint code,
	// out of the shared pool, as the static policy records an exclusive allocation.
	if len(assignments) > 0 {
		if s.CPUManagerPolicy != string(cpumanager.PolicyStatic) {
			return nil, workDir, usagef("--assign needs cpuManagerPolicy static")
		}
		st, err := state.NewCheckpointState(logger, workDir, "cpu_manager_state", s.CPUManagerPolicy, containermap.NewContainerMap())
		if err != nil {
			return nil, workDir, err
		}
		for _, a := range assignments {
			shared := st.GetDefaultCPUSet()
			if !a.cpus.IsSubsetOf(shared.Difference(cpuManager.GetAllCPUs().Difference(cpuManager.GetAllocatableCPUs()))) {
				return nil, workDir, usagef("--assign %s/%s: CPUs %s are not all in the shared pool %s (the reserved CPUs excluded)",
					a.pod, a.container, a.cpus, shared)
			}
			st.SetCPUSet(a.pod, a.container, a.cpus)
			st.SetDefaultCPUSet(shared.Difference(a.cpus))
		}
	}

	after := map[string]any{}
	for _, name := range checkpointFiles {
		data, err := os.ReadFile(filepath.Join(workDir, name))
		if err != nil {
			return nil, workDir, fmt.Errorf("the kubelet left no %s: %w", name, err)
		}
		after[name] = string(data)
	}
	quantities := map[string]string{}
	for name, quantity := range reservation {
		quantities[string(name)] = quantity.String()
	}
	return map[string]any{
		"starts":                     true,
		"configz":                    configzBody,
		"checkpointsBefore":          before,
		"checkpoints":                after,
		"nodeAllocatableReservation": quantities,
		"reservedSystemCPUs":         reservedSystemCPUs.String(),
		// The CPUs the CPU manager keeps out of exclusive allocation: reservedSystemCPUs, or
		// as many as kube + system reserved ask, taken by topology.
		"reservedCPUs": cpuManager.GetAllCPUs().Difference(cpuManager.GetAllocatableCPUs()).String(),
	}, workDir, nil
}

// copyCheckpoint copies a checkpoint file if there is one and returns its text (nil if absent).
func copyCheckpoint(from, to string) (any, error) {
	source, err := os.Open(from)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer source.Close()
	data, err := io.ReadAll(source)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		return nil, err
	}
	return string(data), nil
}

// nodeAllocatableReservation is containerManagerImpl.GetNodeAllocatableReservation
// (pkg/kubelet/cm/node_container_manager_linux.go) with hardEvictionReservation
// (pkg/kubelet/cm/helpers.go): per resource of the machine's capacity, system reserved plus
// kube reserved plus the hard eviction threshold.
func nodeAllocatableReservation(capacity, kubeReserved, systemReserved v1.ResourceList, thresholds []evictionapi.Threshold) v1.ResourceList {
	evictionReservation := hardEvictionReservation(thresholds, capacity)
	result := make(v1.ResourceList)
	for k := range capacity {
		value := resource.NewQuantity(0, resource.DecimalSI)
		if systemReserved != nil {
			value.Add(systemReserved[k])
		}
		if kubeReserved != nil {
			value.Add(kubeReserved[k])
		}
		if evictionReservation != nil {
			value.Add(evictionReservation[k])
		}
		if !value.IsZero() {
			result[k] = *value
		}
	}
	return result
}

func hardEvictionReservation(thresholds []evictionapi.Threshold, capacity v1.ResourceList) v1.ResourceList {
	if len(thresholds) == 0 {
		return nil
	}
	ret := v1.ResourceList{}
	for _, threshold := range thresholds {
		if threshold.Operator != evictionapi.OpLessThan {
			continue
		}
		switch threshold.Signal {
		case evictionapi.SignalMemoryAvailable:
			memoryCapacity := capacity[v1.ResourceMemory]
			value := evictionapi.GetThresholdQuantity(threshold.Value, &memoryCapacity)
			ret[v1.ResourceMemory] = *value
		case evictionapi.SignalNodeFsAvailable:
			storageCapacity := capacity[v1.ResourceEphemeralStorage]
			value := evictionapi.GetThresholdQuantity(threshold.Value, &storageCapacity)
			ret[v1.ResourceEphemeralStorage] = *value
		}
	}
	return ret
}
