package main

// nvml-mock-profiles: the MIG profile tables of one of NVIDIA's go-nvml mocks, read through
// NVML as any caller sees them, with the profile names go-nvlib forms from them.

import (
	"flag"
	"fmt"
	"io"

	nvdev "github.com/NVIDIA/go-nvlib/pkg/nvlib/device"
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"gpuprov.test/peers/internal/migmock"
)

type mockProfile struct {
	Enum          int         `json:"enum"`
	ID            uint32      `json:"id"`
	Name          string      `json:"name"` // go-nvlib's name for a whole-GPU-instance profile
	SliceCount    uint32      `json:"slice_count"`
	InstanceCount uint32      `json:"instance_count"`
	MemoryMB      uint64      `json:"memory_mb"`
	Placements    []placement `json:"placements"`
}

type mockTables struct {
	Mock     string        `json:"mock"`
	GPUs     int           `json:"gpus"`
	Name     string        `json:"name"`
	DeviceID string        `json:"device_id"`
	MemoryMB uint64        `json:"memory_mb"`
	Profiles []mockProfile `json:"profiles"`
}

func init() {
	register("nvml-mock-profiles", "--mock MOCK", func(args []string) (any, error) {
		flags := flag.NewFlagSet("nvml-mock-profiles", flag.ContinueOnError)
		flags.SetOutput(io.Discard)
		name := flags.String("mock", "", "the NVML mock")
		if err := flags.Parse(args); err != nil || flags.NArg() != 0 || *name == "" {
			return nil, usagef("--mock MOCK is required (one of %v)", migmock.Names())
		}
		mock, err := migmock.New(*name, migmock.Options{MockPlacement: true})
		if err != nil {
			return nil, usagef("%v", err)
		}
		d := mock.Server.Devices[0]
		gpuName, _ := d.GetName()
		pci, _ := d.GetPciInfo()
		memory, _ := d.GetMemoryInfo()
		tables := mockTables{Mock: *name, GPUs: len(mock.Server.Devices), Name: gpuName,
			DeviceID: fmt.Sprintf("0x%08X", pci.PciDeviceId), MemoryMB: memory.Total / (1024 * 1024), Profiles: []mockProfile{}}
		devlib := nvdev.New(mock.Server)
		for p := 0; p < nvml.GPU_INSTANCE_PROFILE_COUNT; p++ {
			info, ret := d.GetGpuInstanceProfileInfo(p)
			if ret == nvml.ERROR_NOT_SUPPORTED {
				continue
			}
			if ret != nvml.SUCCESS {
				return nil, fmt.Errorf("profile %d: %v", p, ret)
			}
			profile, err := devlib.NewMigProfile(p, ciEnumForSlices[info.SliceCount], nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
				info.MemorySizeMB, memory.Total)
			if err != nil {
				return nil, fmt.Errorf("profile %d: %v", p, err)
			}
			placements, ret := d.GetGpuInstancePossiblePlacements(&info)
			if ret != nvml.SUCCESS {
				return nil, fmt.Errorf("placements of profile %d: %v", p, ret)
			}
			entry := mockProfile{Enum: p, ID: info.Id, Name: profile.String(), SliceCount: info.SliceCount,
				InstanceCount: info.InstanceCount, MemoryMB: info.MemorySizeMB, Placements: []placement{}}
			for _, pl := range placements {
				entry.Placements = append(entry.Placements, placement{pl.Start, pl.Size})
			}
			tables.Profiles = append(tables.Profiles, entry)
		}
		return tables, nil
	})
}
