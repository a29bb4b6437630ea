package main

// mig-profile-names: the names go-nvlib gives MIG profiles from their memory and the GPU's
// (pkg/nvlib/device NewMigProfile, v0.13.0): the names mig-parted matches a config against and
// the device plugin's nvidia.com/mig-<name> resources carry, whatever the driver prints.
//
//	stdin: [{"gi_profile": NVML GPU-instance profile enum, "memory_mb": N, "device_memory_mb": N}, ...]

import (
	"encoding/json"
	"fmt"
	"os"

	nvdev "github.com/NVIDIA/go-nvlib/pkg/nvlib/device"
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

type profileQuestion struct {
	GIProfile      int    `json:"gi_profile"`
	MemoryMB       uint64 `json:"memory_mb"`
	DeviceMemoryMB uint64 `json:"device_memory_mb"`
}

// giSlices is the compute-slice count of each GPU-instance profile enum gpuprov uses, for the
// compute instance that spans the whole GPU instance.
var giSlices = map[int]uint32{
	nvml.GPU_INSTANCE_PROFILE_1_SLICE: 1, nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1: 1, nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2: 1,
	nvml.GPU_INSTANCE_PROFILE_2_SLICE: 2, nvml.GPU_INSTANCE_PROFILE_2_SLICE_REV1: 2, nvml.GPU_INSTANCE_PROFILE_3_SLICE: 3,
	nvml.GPU_INSTANCE_PROFILE_4_SLICE: 4, nvml.GPU_INSTANCE_PROFILE_6_SLICE: 6, nvml.GPU_INSTANCE_PROFILE_7_SLICE: 7,
	nvml.GPU_INSTANCE_PROFILE_8_SLICE: 8,
}

func init() {
	register("mig-profile-names", "(JSON list on stdin)", func(args []string) (any, error) {
		if len(args) != 0 {
			return nil, usagef("takes its questions on stdin")
		}
		var questions []profileQuestion
		if err := json.NewDecoder(os.Stdin).Decode(&questions); err != nil {
			return nil, usagef("stdin: %v", err)
		}
		// NewMigProfile computes the name from its arguments alone; the library is not asked.
		devlib := nvdev.New(&mock.Interface{})
		names := make([]string, 0, len(questions))
		for _, q := range questions {
			slices, ok := giSlices[q.GIProfile]
			if !ok {
				return nil, usagef("GPU-instance profile %d is not one gpuprov uses", q.GIProfile)
			}
			profile, err := devlib.NewMigProfile(q.GIProfile, ciEnumForSlices[slices], nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
				q.MemoryMB, q.DeviceMemoryMB*1024*1024)
			if err != nil {
				return nil, fmt.Errorf("profile %d: %v", q.GIProfile, err)
			}
			names = append(names, profile.String())
		}
		return names, nil
	})
}
