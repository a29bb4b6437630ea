package main

// mig-parted-config: mig-parted's own reading of a config file and its choice of entries per
// GPU, as `nvidia-mig-parted assert|apply -f FILE -c NAME` makes it (mig-parted v0.13.1).

import (
	"flag"
	"io"
	"strings"

	v1 "github.com/NVIDIA/mig-parted/api/spec/v1"
	"github.com/NVIDIA/mig-parted/cmd/nvidia-mig-parted/assert"
	"github.com/NVIDIA/mig-parted/pkg/types"

	"gpuprov.test/peers/internal/migmock"
)

// gpuSelection is what mig-parted's walk picks for one GPU.
type gpuSelection struct {
	Index    int    `json:"index"`
	DeviceID string `json:"device_id"`
	// Entries of the selected config that match this GPU, in the order mig-parted applies
	// them; each one applied sets the whole GPU, so the last is what the GPU ends with.
	Entries []int `json:"entries"`
}

type migPartedConfigResult struct {
	Configs  map[string]v1.MigConfigSpecSlice `json:"configs"`
	Selected string                           `json:"selected,omitempty"`
	GPUs     []gpuSelection                   `json:"gpus,omitempty"`
}

// parseMigPartedFile reads FILE as `nvidia-mig-parted -f FILE` does.
func parseMigPartedFile(path string) (*v1.Spec, error) {
	return assert.ParseConfigFile(&assert.Flags{ConfigFile: path})
}

// selectMigConfig picks the named config (or the only one) as `-c NAME` does.
func selectMigConfig(spec *v1.Spec, name string) (string, v1.MigConfigSpecSlice, error) {
	flags := &assert.Flags{SelectedConfig: name}
	entries, err := assert.GetSelectedMigConfig(flags, spec)
	return flags.SelectedConfig, entries, err
}

// walkMigConfig visits, for every GPU (by PCI device id, in index order), the entries that
// select it: mig-parted's WalkSelectedMigConfigForEachGPU (cmd/nvidia-mig-parted/assert), which
// reads the device ids from the host's PCI bus and so cannot be called here; the matching is
// the spec's own MatchesDeviceFilter and MatchesDevices.
func walkMigConfig(entries v1.MigConfigSpecSlice, deviceIDs []types.DeviceID, visit func(entry int, mc *v1.MigConfigSpec, gpu int, id types.DeviceID) error) error {
	for e := range entries {
		for i, id := range deviceIDs {
			if !entries[e].MatchesDeviceFilter(id) || !entries[e].MatchesDevices(i) {
				continue
			}
			mc := entries[e]
			if err := visit(e, &mc, i, id); err != nil {
				return err
			}
		}
	}
	return nil
}

func init() {
	register("mig-parted-config", "FILE [--select NAME] [--gpus 0xDDDDVVVV,...]", func(args []string) (any, error) {
		flags := flag.NewFlagSet("mig-parted-config", flag.ContinueOnError)
		flags.SetOutput(io.Discard)
		selected := flags.String("select", "", "config to select (-c)")
		gpuIDs := flags.String("gpus", "", "PCI device ids of the node's GPUs, in index order")
		if len(args) == 0 {
			return nil, usagef("a mig-parted config file is required")
		}
		if err := flags.Parse(args[1:]); err != nil || flags.NArg() != 0 {
			return nil, usagef("bad arguments %v", args[1:])
		}
		spec, err := parseMigPartedFile(args[0])
		if err != nil {
			return nil, err
		}
		result := migPartedConfigResult{Configs: spec.MigConfigs}
		if *selected == "" && *gpuIDs == "" {
			return result, nil
		}
		name, entries, err := selectMigConfig(spec, *selected)
		if err != nil {
			return nil, err
		}
		result.Selected = name
		var ids []types.DeviceID
		if *gpuIDs != "" {
			for _, text := range strings.Split(*gpuIDs, ",") {
				id, err := migmock.ParsePciID(text)
				if err != nil {
					return nil, usagef("--gpus: %v", err)
				}
				ids = append(ids, types.DeviceID(id))
			}
		}
		result.GPUs = make([]gpuSelection, len(ids))
		for i, id := range ids {
			result.GPUs[i] = gpuSelection{Index: i, DeviceID: id.String(), Entries: []int{}}
		}
		err = walkMigConfig(entries, ids, func(entry int, _ *v1.MigConfigSpec, gpu int, _ types.DeviceID) error {
			result.GPUs[gpu].Entries = append(result.GPUs[gpu].Entries, entry)
			return nil
		})
		return result, err
	})
}
