// Package migmock builds NVIDIA's go-nvml mock NVML servers (pkg/nvml/mock/dgx*, mock/gpus) by
// name and gives them what mig-parted needs from a driver that the mocks leave out.
//
// go-nvml v0.13.4-1's mock records CreateGpuInstance with a zero placement and refuses nothing
// (pkg/nvml/mock/server/shared.go: no overlap, capacity or instance-count check), so
// mig-parted's retry over creation orders never runs on it and its layouts have no placements.
// With the driver stand-in here, a create without placement takes the first listed placement
// that overlaps no existing GPU instance; any create is refused with
// ERROR_INSUFFICIENT_RESOURCES when the profile's instance count, the GPU's compute slices or
// every placement is taken (nvml.h, nvmlDeviceCreateGpuInstance: INSUFFICIENT_RESOURCES "if
// the requested GPU instance could not be created"), a compute instance likewise when its GPU
// instance's slices are taken; a destroy with compute instances left is
// refused with ERROR_IN_USE; creates and destroys are counted per GPU. Which free placement
// the real driver picks is not documented (UNVERIFIED: first free is the rule gpuprov's fake
// NVML uses too). The placement tables stay the mock's own, differences from the driver's
// listings included.
package migmock

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	_ "unsafe" // go:linkname, below

	nvdev "github.com/NVIDIA/go-nvlib/pkg/nvlib/device"
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/NVIDIA/mig-parted/pkg/types"
)

// mockGPUs names every GPU configuration go-nvml's mock package ships. The dgx* names are
// NVIDIA's eight-GPU servers; the others are single GPU models built with the same server.
var mockGPUs = map[string]struct {
	config gpus.Config
	count  int
	build  func(...gpus.Config) *server.Server
}{
	"dgxa100":        {gpus.A100_SXM4_40GB, 8, dgxa100.NewWithGPUs},
	"dgxh100":        {gpus.H100_SXM5_80GB, 8, dgxh100.NewWithGPUs},
	"dgxh200":        {gpus.H200_SXM5_141GB, 8, dgxh200.NewWithGPUs},
	"dgxb200":        {gpus.B200_SXM5_180GB, 8, dgxb200.NewWithGPUs},
	"a100-pcie-40gb": {gpus.A100_PCIE_40GB, 1, dgxa100.NewWithGPUs},
	"a100-sxm4-80gb": {gpus.A100_SXM4_80GB, 1, dgxa100.NewWithGPUs},
	"a100-pcie-80gb": {gpus.A100_PCIE_80GB, 1, dgxa100.NewWithGPUs},
	"a30":            {gpus.A30_PCIE_24GB, 1, dgxa100.NewWithGPUs},
}

// Names lists the mocks New accepts.
func Names() []string {
	names := make([]string, 0, len(mockGPUs))
	for name := range mockGPUs {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Counts are the instances the NVML calls of one GPU made and removed since the last Reset.
type Counts struct {
	GpuInstancesCreated       int `json:"gpu_instances_created"`
	GpuInstancesDestroyed     int `json:"gpu_instances_destroyed"`
	ComputeInstancesCreated   int `json:"compute_instances_created"`
	ComputeInstancesDestroyed int `json:"compute_instances_destroyed"`
	// Refused creates (ERROR_INSUFFICIENT_RESOURCES), e.g. an ordering mig-parted retries.
	GpuInstancesRefused int `json:"gpu_instances_refused"`
}

// Mock is one mock server with its per-GPU counts.
type Mock struct {
	Server *server.Server
	Counts []Counts
}

// Options change a mock where its tables are known to differ from the hardware.
type Options struct {
	// PciDeviceID replaces the mock's PCI id (0xDDDDVVVV), for GPUs whose mock id is not the
	// one NVIDIA's configs filter on; 0 keeps the mock's.
	PciDeviceID uint32
	// MockPlacement leaves CreateGpuInstance as the mock has it (zero placement, no checks).
	MockPlacement bool
}

// New builds the mock called name.
func New(name string, opts Options) (*Mock, error) {
	spec, ok := mockGPUs[name]
	if !ok {
		return nil, fmt.Errorf("unknown mock %q; known: %s", name, strings.Join(Names(), ", "))
	}
	config := spec.config
	if opts.PciDeviceID != 0 {
		config.PciDeviceId = opts.PciDeviceID
	}
	s := spec.build(gpus.Multiple(spec.count, config)...)
	m := &Mock{Server: s, Counts: make([]Counts, len(s.Devices))}
	if !opts.MockPlacement {
		for i, d := range s.Devices {
			m.driverPlacement(i, d.(*server.Device))
		}
	}
	return m, nil
}

// ResetCounts zeroes the counts (after a starting layout is set up).
func (m *Mock) ResetCounts() {
	for i := range m.Counts {
		m.Counts[i] = Counts{}
	}
}

// ParsePciID reads 0xDDDDVVVV.
func ParsePciID(text string) (uint32, error) {
	value, err := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(text), "0x"), 16, 32)
	if err != nil {
		return 0, fmt.Errorf("PCI id %q is not of the form 0xDDDDVVVV", text)
	}
	return uint32(value), nil
}

func (m *Mock) driverPlacement(index int, d *server.Device) {
	createWithPlacement := d.CreateGpuInstanceWithPlacementFunc
	counts := &m.Counts[index]

	occupied := func() (mask uint64, slices uint32, perProfile map[uint32]uint32) {
		d.RLock()
		defer d.RUnlock()
		perProfile = map[uint32]uint32{}
		for gi := range d.GpuInstances {
			p := gi.Info.Placement
			mask |= ((uint64(1) << p.Size) - 1) << p.Start
			slices += d.Config.MIGProfiles.GpuInstanceProfiles[int(gi.Info.ProfileId)].SliceCount
			perProfile[gi.Info.ProfileId]++
		}
		return mask, slices, perProfile
	}
	computeSlices := uint32(0)
	for _, info := range d.Config.MIGProfiles.GpuInstanceProfiles {
		if info.SliceCount > computeSlices {
			computeSlices = info.SliceCount
		}
	}
	fits := func(info *nvml.GpuInstanceProfileInfo, p nvml.GpuInstancePlacement) bool {
		mask, slices, perProfile := occupied()
		bits := ((uint64(1) << p.Size) - 1) << p.Start
		return mask&bits == 0 && perProfile[info.Id] < info.InstanceCount && slices+info.SliceCount <= computeSlices
	}
	create := func(info *nvml.GpuInstanceProfileInfo, p *nvml.GpuInstancePlacement) (nvml.GpuInstance, nvml.Return) {
		gi, ret := createWithPlacement(info, p)
		if ret != nvml.SUCCESS {
			return gi, ret
		}
		counts.GpuInstancesCreated++
		m.countInstances(gi.(*server.GpuInstance), counts)
		return gi, ret
	}

	d.CreateGpuInstanceWithPlacementFunc = func(info *nvml.GpuInstanceProfileInfo, p *nvml.GpuInstancePlacement) (nvml.GpuInstance, nvml.Return) {
		listed := false
		for _, candidate := range d.Config.MIGProfiles.GpuInstancePlacements[int(info.Id)] {
			listed = listed || candidate == *p
		}
		if !listed {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		if !fits(info, *p) {
			counts.GpuInstancesRefused++
			return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
		}
		return create(info, p)
	}
	d.CreateGpuInstanceFunc = func(info *nvml.GpuInstanceProfileInfo) (nvml.GpuInstance, nvml.Return) {
		for _, candidate := range d.Config.MIGProfiles.GpuInstancePlacements[int(info.Id)] {
			if fits(info, candidate) {
				p := candidate
				return create(info, &p)
			}
		}
		counts.GpuInstancesRefused++
		return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
	}
}

// countInstances wraps one GPU instance's destroy and its compute-instance calls.
func (m *Mock) countInstances(gi *server.GpuInstance, counts *Counts) {
	destroy := gi.DestroyFunc
	gi.DestroyFunc = func() nvml.Return {
		gi.RLock()
		busy := len(gi.ComputeInstances)
		gi.RUnlock()
		if busy > 0 {
			// nvml.h nvmlGpuInstanceDestroy: NVML_ERROR_IN_USE "if processes (e.g. CUDA
			// application) or compute instances are active"; the mock would drop them.
			return nvml.ERROR_IN_USE
		}
		ret := destroy()
		if ret == nvml.SUCCESS {
			counts.GpuInstancesDestroyed++
		}
		return ret
	}
	createCI := gi.CreateComputeInstanceFunc
	giSlices := gi.MIGProfiles.GpuInstanceProfiles[int(gi.Info.ProfileId)].SliceCount
	gi.CreateComputeInstanceFunc = func(info *nvml.ComputeInstanceProfileInfo) (nvml.ComputeInstance, nvml.Return) {
		// The mock would put any number of compute instances into one GPU instance; the
		// driver fits them into the GPU instance's slices and the profile's instance count
		// (nvml.h, nvmlGpuInstanceCreateComputeInstance: INSUFFICIENT_RESOURCES "if the
		// requested compute instance could not be created"). mig-parted relies on that
		// refusal to open a new GPU instance for the next 1g.10gb of "1g.10gb: 2".
		gi.RLock()
		used, same := uint32(0), uint32(0)
		for existing := range gi.ComputeInstances {
			profile := gi.MIGProfiles.ComputeInstanceProfiles[int(gi.Info.ProfileId)][int(existing.Info.ProfileId)]
			used += profile.SliceCount
			if existing.Info.ProfileId == info.Id {
				same++
			}
		}
		gi.RUnlock()
		if used+info.SliceCount > giSlices || same >= info.InstanceCount {
			return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
		}
		ci, ret := createCI(info)
		if ret != nvml.SUCCESS {
			return ci, ret
		}
		counts.ComputeInstancesCreated++
		mockCI := ci.(*server.ComputeInstance)
		destroyCI := mockCI.DestroyFunc
		mockCI.DestroyFunc = func() nvml.Return {
			ret := destroyCI()
			if ret == nvml.SUCCESS {
				counts.ComputeInstancesDestroyed++
			}
			return ret
		}
		return ci, ret
	}
}

// The profile names mig-parted reads in a config ("1g.10gb") are parsed by its pkg/types
// against a package-level NVML (pkg/types/nvdev.go, v0.13.1) that a caller can only point at
// its own single A100-40GB mock (SetMockNVdevlib); otherwise it loads the real library, and
// with none MigConfig.Flatten returns nothing, so an apply "succeeds" creating no instance.
// The harness points that NVML at the same mock the config manager runs on.
//
//go:linkname migPartedNvml github.com/NVIDIA/mig-parted/pkg/types.nvmllib
var migPartedNvml nvml.Interface

//go:linkname migPartedNvdev github.com/NVIDIA/mig-parted/pkg/types.nvdevlib
var migPartedNvdev nvdev.Interface

// NameProfilesWith makes mig-parted's profile-name parsing read this mock's GPUs.
func (m *Mock) NameProfilesWith() {
	migPartedNvml = m.Server
	migPartedNvdev = nil
	_ = types.MigConfig{} // pkg/types must be linked for the names above
}
