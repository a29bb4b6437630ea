package main

// mig-parted-apply: `nvidia-mig-parted apply -f FILE -c NAME` on NVIDIA's NVML mock, with
// mig-parted's own mode and config managers (pkg/mig/mode, pkg/mig/config, v0.13.1).

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	nvdev "github.com/NVIDIA/go-nvlib/pkg/nvlib/device"
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	v1 "github.com/NVIDIA/mig-parted/api/spec/v1"
	"github.com/NVIDIA/mig-parted/pkg/mig/config"
	"github.com/NVIDIA/mig-parted/pkg/mig/mode"
	"github.com/NVIDIA/mig-parted/pkg/types"
	"github.com/sirupsen/logrus"

	"gpuprov.test/peers/internal/migmock"
)

type placement struct {
	Start uint32 `json:"start"`
	Size  uint32 `json:"size"`
}

type gpuInstance struct {
	// The profile name as go-nvlib forms it for the GPU instance (the name mig-parted and the
	// device plugin use), e.g. 3g.40gb, 1g.10gb+me.
	Profile string `json:"profile"`
	// The profile's NVML id as the mock reports it (the mock uses the enum value).
	ProfileID        uint32    `json:"profile_id"`
	Placement        placement `json:"placement"`
	ComputeInstances []string  `json:"compute_instances"`
}

type appliedGPU struct {
	Index        int             `json:"index"`
	DeviceID     string          `json:"device_id"`
	Name         string          `json:"name"`
	MigEnabled   bool            `json:"mig_enabled"`
	MigConfig    types.MigConfig `json:"mig_config"` // mig-parted's own GetMigConfig
	GpuInstances []gpuInstance   `json:"gpu_instances"`
	Counts       migmock.Counts  `json:"counts"`
	// The entries of the config that select this GPU (see mig-parted-config).
	Entries []int `json:"entries"`
}

type migPartedApplyResult struct {
	Mock          string       `json:"mock"`
	Config        string       `json:"config"`
	From          string       `json:"from,omitempty"`
	PlacementRule string       `json:"placement_rule"`
	GPUs          []appliedGPU `json:"gpus"`
}

// migPartedRun is one mock with mig-parted's managers on it.
type migPartedRun struct {
	mock    *migmock.Mock
	modes   mode.Manager
	configs config.Manager
	ids     []types.DeviceID
	entries map[int][]int
}

func newMigPartedRun(mock *migmock.Mock) (*migPartedRun, error) {
	run := &migPartedRun{mock: mock, modes: mode.NewMockNvmlMigModeManager(mock.Server),
		configs: config.NewMockNvmlMigConfigManager(mock.Server)}
	for i, d := range mock.Server.Devices {
		pci, ret := d.GetPciInfo()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("GPU %d: PCI info: %v", i, ret)
		}
		run.ids = append(run.ids, types.DeviceID(pci.PciDeviceId))
	}
	return run, nil
}

// apply runs apply's steps (cmd/nvidia-mig-parted/apply/apply.go ApplyMigConfigWithHooks,
// without hooks): assert the mode, apply it if that fails, then assert the config and apply
// it if that fails. The per-GPU decisions restate assert/mode.go, apply/mode.go,
// assert/config.go and apply/config.go, whose loops read the host's PCI bus and real NVML.
func (r *migPartedRun) apply(entries v1.MigConfigSpecSlice) error {
	r.entries = map[int][]int{}
	_ = walkMigConfig(entries, r.ids, func(e int, _ *v1.MigConfigSpec, i int, _ types.DeviceID) error {
		r.entries[i] = append(r.entries[i], e)
		return nil
	})
	if err := r.assertMode(entries); err != nil {
		if err := r.applyMode(entries); err != nil {
			return err
		}
	}
	if err := r.assertConfig(entries); err != nil {
		return r.applyConfig(entries)
	}
	return nil
}

func (r *migPartedRun) assertMode(entries v1.MigConfigSpecSlice) error {
	return walkMigConfig(entries, r.ids, func(_ int, mc *v1.MigConfigSpec, i int, _ types.DeviceID) error {
		capable, err := r.modes.IsMigCapable(i)
		if err != nil {
			return fmt.Errorf("error checking MIG capable: %v", err)
		}
		if !capable && mc.MigEnabled {
			return errors.New("unable to assert MIG mode enabled on non MIG-capable GPU")
		}
		if !capable {
			return nil
		}
		m, err := r.modes.GetMigMode(i)
		if err != nil {
			return fmt.Errorf("error getting MIG mode: %v", err)
		}
		if (mc.MigEnabled && m == mode.Disabled) || (!mc.MigEnabled && m == mode.Enabled) {
			return errors.New("current mode different than mode being asserted")
		}
		return nil
	})
}

func (r *migPartedRun) applyMode(entries v1.MigConfigSpecSlice) error {
	return walkMigConfig(entries, r.ids, func(_ int, mc *v1.MigConfigSpec, i int, _ types.DeviceID) error {
		desired := mode.Disabled
		if mc.MigEnabled {
			desired = mode.Enabled
		}
		capable, err := r.modes.IsMigCapable(i)
		if err != nil {
			return fmt.Errorf("error checking MIG capable: %v", err)
		}
		if !capable && (mc.MatchesAllDevices() || !mc.MigEnabled) {
			return nil
		}
		if !capable {
			return errors.New("cannot set MIG mode on non MIG-capable GPU")
		}
		current, err := r.modes.GetMigMode(i)
		if err != nil {
			return fmt.Errorf("error getting MIG mode: %v", err)
		}
		if current != mode.Disabled {
			if err := r.configs.ClearMigConfig(i); err != nil {
				return fmt.Errorf("error clearing existing MIG configurations: %v", err)
			}
		}
		if err := r.modes.SetMigMode(i, desired); err != nil {
			return fmt.Errorf("error setting MIG mode: %v", err)
		}
		// The mocks apply a mode change at once; nothing is pending, so no GPU reset follows.
		return nil
	})
}

func (r *migPartedRun) assertConfig(entries v1.MigConfigSpecSlice) error {
	matched := make([]bool, len(r.ids))
	err := walkMigConfig(entries, r.ids, func(_ int, mc *v1.MigConfigSpec, i int, _ types.DeviceID) error {
		capable, err := r.modes.IsMigCapable(i)
		if err != nil {
			return fmt.Errorf("error checking MIG capable: %v", err)
		}
		if !capable && !mc.MigEnabled {
			matched[i] = true
			return nil
		}
		m, err := r.modes.GetMigMode(i)
		if err != nil {
			return fmt.Errorf("error getting MIG mode: %v", err)
		}
		if !mc.MigEnabled && m == mode.Disabled {
			matched[i] = true
			return nil
		}
		current, err := r.configs.GetMigConfig(i)
		if err != nil {
			return fmt.Errorf("error getting MIGConfig: %v", err)
		}
		matched[i] = current.Equals(mc.MigDevices)
		return nil
	})
	if err != nil {
		return err
	}
	for _, ok := range matched {
		if !ok {
			return errors.New("not all GPUs match the specified config")
		}
	}
	return nil
}

func (r *migPartedRun) applyConfig(entries v1.MigConfigSpecSlice) error {
	return walkMigConfig(entries, r.ids, func(_ int, mc *v1.MigConfigSpec, i int, _ types.DeviceID) error {
		capable, err := r.modes.IsMigCapable(i)
		if err != nil {
			return fmt.Errorf("error checking MIG capable: %v", err)
		}
		if !capable && (mc.MatchesAllDevices() || !mc.MigEnabled) {
			return nil
		}
		if !capable {
			return errors.New("cannot set MIG config on non MIG-capable GPU")
		}
		m, err := r.modes.GetMigMode(i)
		if err != nil {
			return fmt.Errorf("error getting MIG mode: %v", err)
		}
		if mc.MigEnabled && m == mode.Disabled {
			return errors.New("unable to apply MIG config with MIG mode disabled")
		}
		if !mc.MigEnabled && m == mode.Enabled {
			return errors.New("MIG mode is currently enabled, but the configuration specifies it should be disabled")
		}
		if !mc.MigEnabled {
			return nil
		}
		current, err := r.configs.GetMigConfig(i)
		if err != nil {
			return fmt.Errorf("error getting MIGConfig: %v", err)
		}
		if current.Equals(mc.MigDevices) {
			return nil
		}
		if err := r.configs.SetMigConfig(i, mc.MigDevices); err != nil {
			return fmt.Errorf("GPU %d: error setting MIGConfig: %v", i, err)
		}
		return nil
	})
}

// ciEnumForSlices is the compute-instance profile that spans a whole GPU instance of n slices.
var ciEnumForSlices = map[uint32]int{
	1: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, 2: nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE,
	3: nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE, 4: nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE,
	6: nvml.COMPUTE_INSTANCE_PROFILE_6_SLICE, 7: nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE,
	8: nvml.COMPUTE_INSTANCE_PROFILE_8_SLICE,
}

// layout reads GPU i back through NVML: every GPU instance with its placement and compute
// instances, named as go-nvlib names them.
func (r *migPartedRun) layout(i int) (appliedGPU, error) {
	d := r.mock.Server.Devices[i]
	name, _ := d.GetName()
	gpu := appliedGPU{Index: i, DeviceID: r.ids[i].String(), Name: name, GpuInstances: []gpuInstance{},
		Counts: r.mock.Counts[i], Entries: r.entries[i]}
	if gpu.Entries == nil {
		gpu.Entries = []int{}
	}
	current, _, ret := d.GetMigMode()
	if ret != nvml.SUCCESS {
		return gpu, fmt.Errorf("GPU %d: MIG mode: %v", i, ret)
	}
	gpu.MigEnabled = current == nvml.DEVICE_MIG_ENABLE
	if !gpu.MigEnabled {
		return gpu, nil
	}
	migConfig, err := r.configs.GetMigConfig(i)
	if err != nil {
		return gpu, fmt.Errorf("GPU %d: %v", i, err)
	}
	gpu.MigConfig = migConfig
	memory, _ := d.GetMemoryInfo()
	devlib := nvdev.New(r.mock.Server)
	for p := 0; p < nvml.GPU_INSTANCE_PROFILE_COUNT; p++ {
		info, ret := d.GetGpuInstanceProfileInfo(p)
		if ret != nvml.SUCCESS {
			continue
		}
		gis, ret := d.GetGpuInstances(&info)
		if ret != nvml.SUCCESS {
			return gpu, fmt.Errorf("GPU %d: GPU instances of profile %d: %v", i, p, ret)
		}
		for _, gi := range gis {
			giInfo, _ := gi.GetInfo()
			profile, err := devlib.NewMigProfile(p, ciEnumForSlices[info.SliceCount], nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
				info.MemorySizeMB, memory.Total)
			if err != nil {
				return gpu, fmt.Errorf("GPU %d: profile %d: %v", i, p, err)
			}
			inst := gpuInstance{Profile: profile.String(), ProfileID: giInfo.ProfileId,
				Placement: placement{giInfo.Placement.Start, giInfo.Placement.Size}, ComputeInstances: []string{}}
			for c := 0; c < nvml.COMPUTE_INSTANCE_PROFILE_COUNT; c++ {
				ciInfo, ret := gi.GetComputeInstanceProfileInfo(c, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
				if ret != nvml.SUCCESS {
					continue
				}
				cis, _ := gi.GetComputeInstances(&ciInfo)
				for range cis {
					ci, err := types.NewMigProfile(p, c, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, info.MemorySizeMB, memory.Total)
					if err != nil {
						return gpu, fmt.Errorf("GPU %d: compute instance profile %d: %v", i, c, err)
					}
					inst.ComputeInstances = append(inst.ComputeInstances, ci.String())
				}
			}
			sort.Strings(inst.ComputeInstances)
			gpu.GpuInstances = append(gpu.GpuInstances, inst)
		}
	}
	sort.Slice(gpu.GpuInstances, func(a, b int) bool {
		x, y := gpu.GpuInstances[a], gpu.GpuInstances[b]
		if x.Placement.Start != y.Placement.Start {
			return x.Placement.Start < y.Placement.Start
		}
		return x.Profile < y.Profile
	})
	return gpu, nil
}

// applyOnFreshMock applies config name of spec (after from, when given) on a new mock.
func applyOnFreshMock(spec *v1.Spec, mockName string, opts migmock.Options, from, name string) (*migPartedApplyResult, error) {
	mock, err := migmock.New(mockName, opts)
	if err != nil {
		return nil, usagef("%v", err)
	}
	mock.NameProfilesWith()
	run, err := newMigPartedRun(mock)
	if err != nil {
		return nil, err
	}
	if from != "" {
		_, entries, err := selectMigConfig(spec, from)
		if err != nil {
			return nil, err
		}
		if err := run.apply(entries); err != nil {
			return nil, fmt.Errorf("applying the starting config %s: %v", from, err)
		}
		mock.ResetCounts()
	}
	selected, entries, err := selectMigConfig(spec, name)
	if err != nil {
		return nil, err
	}
	if err := run.apply(entries); err != nil {
		return nil, err
	}
	rule := "first-free"
	if opts.MockPlacement {
		rule = "mock"
	}
	result := &migPartedApplyResult{Mock: mockName, Config: selected, From: from, PlacementRule: rule}
	for i := range mock.Server.Devices {
		gpu, err := run.layout(i)
		if err != nil {
			return nil, err
		}
		result.GPUs = append(result.GPUs, gpu)
	}
	return result, nil
}

func init() {
	register("mig-parted-apply", "FILE (NAME | --each) --mock MOCK [--from NAME] [--pci-id 0xDDDDVVVV] [--placement first-free|mock]",
		func(args []string) (any, error) {
			flags := flag.NewFlagSet("mig-parted-apply", flag.ContinueOnError)
			flags.SetOutput(io.Discard)
			mockName := flags.String("mock", "", "the NVML mock")
			each := flags.Bool("each", false, "apply every config of FILE, each on a fresh mock")
			from := flags.String("from", "", "a config of FILE applied first (its changes are not counted)")
			pciID := flags.String("pci-id", "", "the PCI id the mock's GPUs report instead of the mock's own")
			rule := flags.String("placement", "first-free", "first-free: the driver stand-in of internal/migmock; mock: the mock as it is")
			if len(args) < 1 {
				return nil, usagef("FILE is required")
			}
			rest, name := args[1:], ""
			if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
				name, rest = rest[0], rest[1:]
			}
			if err := flags.Parse(rest); err != nil || flags.NArg() != 0 || (name == "") == !*each {
				return nil, usagef("give one config NAME or --each; bad arguments %v", args[1:])
			}
			if *rule != "first-free" && *rule != "mock" {
				return nil, usagef("--placement must be first-free or mock")
			}
			opts := migmock.Options{MockPlacement: *rule == "mock"}
			if *pciID != "" {
				id, err := migmock.ParsePciID(*pciID)
				if err != nil {
					return nil, usagef("--pci-id: %v", err)
				}
				opts.PciDeviceID = id
			}
			// mig-parted logs every failed creation order; the counts report them.
			logrus.SetOutput(io.Discard)
			spec, err := parseMigPartedFile(args[0])
			if err != nil {
				return nil, err
			}
			if !*each {
				return applyOnFreshMock(spec, *mockName, opts, *from, name)
			}
			results := map[string]any{}
			for config := range spec.MigConfigs {
				result, err := applyOnFreshMock(spec, *mockName, opts, *from, config)
				if _, usage := err.(usageError); usage {
					return nil, err
				}
				if err != nil {
					results[config] = map[string]string{"error": err.Error()}
				} else {
					results[config] = result
				}
			}
			return map[string]any{"mock": *mockName, "results": results}, nil
		})
}
