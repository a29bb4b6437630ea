package main

// nvml-script runs a JSON list of NVML calls on one of NVIDIA's go-nvml mock servers and prints,
// per call, the NVML return code and the result. gpuprov's differential test runs the same
// script on its fake pynvml and compares the codes.
//
// A step: {"call": NAME, "args": [...], "as": "label"}. NAME is the nvml.h function without its
// "nvml" prefix (DeviceSetMigMode). An argument "@label" is what an earlier step saved: a device,
// GPU instance or compute instance handle, a profile info, or a list of placements; a placement
// argument is [start, size] or {"from": "@placements", "index": N}. Profile enums may be given by
// their nvml.h name without the NVML_ prefix (GPU_INSTANCE_PROFILE_3_SLICE). A call the mock does
// not implement (its function is nil) reports "MOCK_UNIMPLEMENTED"; a call that needs what an
// earlier, failed step would have saved reports "SKIPPED".

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
)

type nvmlScriptStep struct {
	Call string            `json:"call"`
	Args []json.RawMessage `json:"args"`
	As   string            `json:"as,omitempty"`
}

type nvmlScriptResult struct {
	Call   string `json:"call"`
	Return string `json:"return"`
	Value  any    `json:"value,omitempty"`
}

var nvmlScriptMocks = map[string]func() nvml.Interface{
	"dgxa100": func() nvml.Interface { return dgxa100.New() },
	"dgxh100": func() nvml.Interface { return dgxh100.New() },
	"dgxh200": func() nvml.Interface { return dgxh200.New() },
	"dgxb200": func() nvml.Interface { return dgxb200.New() },
}

var nvmlScriptEnums = map[string]int{
	"GPU_INSTANCE_PROFILE_1_SLICE":           nvml.GPU_INSTANCE_PROFILE_1_SLICE,
	"GPU_INSTANCE_PROFILE_2_SLICE":           nvml.GPU_INSTANCE_PROFILE_2_SLICE,
	"GPU_INSTANCE_PROFILE_3_SLICE":           nvml.GPU_INSTANCE_PROFILE_3_SLICE,
	"GPU_INSTANCE_PROFILE_4_SLICE":           nvml.GPU_INSTANCE_PROFILE_4_SLICE,
	"GPU_INSTANCE_PROFILE_7_SLICE":           nvml.GPU_INSTANCE_PROFILE_7_SLICE,
	"GPU_INSTANCE_PROFILE_1_SLICE_REV1":      nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1,
	"GPU_INSTANCE_PROFILE_1_SLICE_REV2":      nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2,
	"COMPUTE_INSTANCE_PROFILE_1_SLICE":       nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE,
	"COMPUTE_INSTANCE_PROFILE_2_SLICE":       nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE,
	"COMPUTE_INSTANCE_PROFILE_3_SLICE":       nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE,
	"COMPUTE_INSTANCE_PROFILE_4_SLICE":       nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE,
	"COMPUTE_INSTANCE_PROFILE_7_SLICE":       nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE,
	"COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED": nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
	"DEVICE_MIG_DISABLE":                     nvml.DEVICE_MIG_DISABLE,
	"DEVICE_MIG_ENABLE":                      nvml.DEVICE_MIG_ENABLE,
}

func init() {
	register("nvml-script", "FILE --mock dgxa100|dgxh100|dgxh200|dgxb200", func(args []string) (any, error) {
		if len(args) != 3 || args[1] != "--mock" {
			return nil, usagef("want FILE --mock MOCK")
		}
		newMock, ok := nvmlScriptMocks[args[2]]
		if !ok {
			names := make([]string, 0, len(nvmlScriptMocks))
			for name := range nvmlScriptMocks {
				names = append(names, name)
			}
			sort.Strings(names)
			return nil, usagef("unknown mock %q (have %v)", args[2], names)
		}
		data, err := os.ReadFile(args[0])
		if err != nil {
			return nil, err
		}
		var steps []nvmlScriptStep
		if err := json.Unmarshal(data, &steps); err != nil {
			return nil, fmt.Errorf("%s: not a JSON list of steps: %w", args[0], err)
		}
		lib := newMock()
		if ret := lib.Init(); ret != nvml.SUCCESS {
			return nil, fmt.Errorf("mock Init: %v", ret)
		}
		run := nvmlScriptRun{lib: lib, saved: map[string]any{}}
		results := make([]nvmlScriptResult, 0, len(steps))
		for number, step := range steps {
			result, err := run.step(step)
			if err != nil {
				return nil, fmt.Errorf("step %d (%s): %w", number, step.Call, err)
			}
			results = append(results, result)
		}
		return map[string]any{"mock": args[2], "steps": results}, nil
	})
}

// errNvmlScriptUnsaved: a step refers to a label no earlier step saved (that step failed).
var errNvmlScriptUnsaved = errors.New("nothing saved under that label")

type nvmlScriptRun struct {
	lib   nvml.Interface
	saved map[string]any
}

// ref resolves "@label" to what an earlier step saved.
func (r *nvmlScriptRun) ref(raw json.RawMessage) (any, error) {
	var label string
	if err := json.Unmarshal(raw, &label); err != nil || len(label) < 2 || label[0] != '@' {
		return nil, fmt.Errorf("expected \"@label\", got %s", raw)
	}
	value, ok := r.saved[label[1:]]
	if !ok {
		return nil, fmt.Errorf("%s: %w", label, errNvmlScriptUnsaved)
	}
	return value, nil
}

func (r *nvmlScriptRun) integer(raw json.RawMessage) (int, error) {
	var number int
	if err := json.Unmarshal(raw, &number); err == nil {
		return number, nil
	}
	var name string
	if err := json.Unmarshal(raw, &name); err != nil {
		return 0, fmt.Errorf("expected a number or an nvml.h name, got %s", raw)
	}
	value, ok := nvmlScriptEnums[name]
	if !ok {
		return 0, fmt.Errorf("unknown name %s", name)
	}
	return value, nil
}

func (r *nvmlScriptRun) placement(raw json.RawMessage) (*nvml.GpuInstancePlacement, error) {
	var pair []uint32
	if err := json.Unmarshal(raw, &pair); err == nil && len(pair) == 2 {
		return &nvml.GpuInstancePlacement{Start: pair[0], Size: pair[1]}, nil
	}
	var pick struct {
		From  json.RawMessage `json:"from"`
		Index int             `json:"index"`
	}
	if err := json.Unmarshal(raw, &pick); err != nil || pick.From == nil {
		return nil, fmt.Errorf("a placement is [start, size] or {\"from\": \"@label\", \"index\": N}, got %s", raw)
	}
	value, err := r.ref(pick.From)
	if err != nil {
		return nil, err
	}
	list, ok := value.([]nvml.GpuInstancePlacement)
	if !ok || pick.Index < 0 || pick.Index >= len(list) {
		return nil, fmt.Errorf("%s has no placement %d", pick.From, pick.Index)
	}
	return &list[pick.Index], nil
}

func (r *nvmlScriptRun) device(raw json.RawMessage) (nvml.Device, error) {
	value, err := r.ref(raw)
	if err != nil {
		return nil, err
	}
	if device, ok := value.(nvml.Device); ok {
		return device, nil
	}
	return nil, fmt.Errorf("%s is not a device handle", raw)
}

func (r *nvmlScriptRun) gpuInstance(raw json.RawMessage) (nvml.GpuInstance, error) {
	value, err := r.ref(raw)
	if err != nil {
		return nil, err
	}
	if gi, ok := value.(nvml.GpuInstance); ok {
		return gi, nil
	}
	return nil, fmt.Errorf("%s is not a GPU instance handle", raw)
}

func (r *nvmlScriptRun) giProfile(raw json.RawMessage) (*nvml.GpuInstanceProfileInfo, error) {
	value, err := r.ref(raw)
	if err != nil {
		return nil, err
	}
	if info, ok := value.(nvml.GpuInstanceProfileInfo); ok {
		return &info, nil
	}
	return nil, fmt.Errorf("%s is not a GPU instance profile info", raw)
}

func (r *nvmlScriptRun) ciProfile(raw json.RawMessage) (*nvml.ComputeInstanceProfileInfo, error) {
	value, err := r.ref(raw)
	if err != nil {
		return nil, err
	}
	if info, ok := value.(nvml.ComputeInstanceProfileInfo); ok {
		return &info, nil
	}
	return nil, fmt.Errorf("%s is not a compute instance profile info", raw)
}

// step runs one call; a mock function left nil panics, which is reported, not fatal.
func (r *nvmlScriptRun) step(step nvmlScriptStep) (result nvmlScriptResult, err error) {
	result.Call = step.Call
	defer func() {
		if recovered := recover(); recovered != nil {
			result.Return, result.Value, err = "MOCK_UNIMPLEMENTED", fmt.Sprint(recovered), nil
		}
	}()
	saved, value, ret, err := r.call(step)
	if errors.Is(err, errNvmlScriptUnsaved) {
		result.Return, result.Value = "SKIPPED", err.Error()
		return result, nil
	}
	if err != nil {
		return result, err
	}
	result.Return, result.Value = ret.String(), value
	if step.As != "" && ret == nvml.SUCCESS {
		r.saved[step.As] = saved
	}
	return result, nil
}

func (r *nvmlScriptRun) args(step nvmlScriptStep, want int) error {
	if len(step.Args) != want {
		return fmt.Errorf("takes %d arguments, got %d", want, len(step.Args))
	}
	return nil
}

// call returns (what "as" saves, what is printed, NVML's return, a script error).
func (r *nvmlScriptRun) call(step nvmlScriptStep) (any, any, nvml.Return, error) {
	fail := func(err error) (any, any, nvml.Return, error) { return nil, nil, nvml.SUCCESS, err }
	switch step.Call {
	case "DeviceGetCount":
		count, ret := r.lib.DeviceGetCount()
		return count, count, ret, r.args(step, 0)
	case "DeviceGetHandleByIndex":
		if err := r.args(step, 1); err != nil {
			return fail(err)
		}
		index, err := r.integer(step.Args[0])
		if err != nil {
			return fail(err)
		}
		device, ret := r.lib.DeviceGetHandleByIndex(index)
		return device, nil, ret, nil
	}
	if len(step.Args) == 0 {
		return fail(fmt.Errorf("unknown call, or a handle argument is missing"))
	}
	switch step.Call {
	case "DeviceGetMigMode", "DeviceSetMigMode", "DeviceGetMaxMigDeviceCount", "DeviceGetComputeMode",
		"DeviceGetGpuInstanceProfileInfo", "DeviceGetGpuInstancePossiblePlacements", "DeviceCreateGpuInstance",
		"DeviceCreateGpuInstanceWithPlacement", "DeviceGetGpuInstances", "DeviceGetMigDeviceHandleByIndex":
		device, err := r.device(step.Args[0])
		if err != nil {
			return fail(err)
		}
		return r.deviceCall(step, device)
	case "GpuInstanceGetInfo", "GpuInstanceGetComputeInstanceProfileInfo", "GpuInstanceCreateComputeInstance",
		"GpuInstanceGetComputeInstances", "GpuInstanceDestroy":
		gi, err := r.gpuInstance(step.Args[0])
		if err != nil {
			return fail(err)
		}
		return r.gpuInstanceCall(step, gi)
	case "ComputeInstanceDestroy":
		value, err := r.ref(step.Args[0])
		if err != nil {
			return fail(err)
		}
		ci, ok := value.(nvml.ComputeInstance)
		if !ok {
			return fail(fmt.Errorf("%s is not a compute instance handle", step.Args[0]))
		}
		return nil, nil, ci.Destroy(), r.args(step, 1)
	}
	return fail(fmt.Errorf("unknown call"))
}

func (r *nvmlScriptRun) deviceCall(step nvmlScriptStep, device nvml.Device) (any, any, nvml.Return, error) {
	fail := func(err error) (any, any, nvml.Return, error) { return nil, nil, nvml.SUCCESS, err }
	switch step.Call {
	case "DeviceGetMigMode":
		current, pending, ret := device.GetMigMode()
		return nil, []int{current, pending}, ret, r.args(step, 1)
	case "DeviceSetMigMode":
		if err := r.args(step, 2); err != nil {
			return fail(err)
		}
		mode, err := r.integer(step.Args[1])
		if err != nil {
			return fail(err)
		}
		activation, ret := device.SetMigMode(mode)
		return nil, activation.String(), ret, nil
	case "DeviceGetMaxMigDeviceCount":
		count, ret := device.GetMaxMigDeviceCount()
		return nil, count, ret, r.args(step, 1)
	case "DeviceGetComputeMode":
		mode, ret := device.GetComputeMode()
		return nil, int(mode), ret, r.args(step, 1)
	case "DeviceGetGpuInstanceProfileInfo":
		if err := r.args(step, 2); err != nil {
			return fail(err)
		}
		enum, err := r.integer(step.Args[1])
		if err != nil {
			return fail(err)
		}
		info, ret := device.GetGpuInstanceProfileInfo(enum)
		return info, map[string]uint32{"sliceCount": info.SliceCount, "instanceCount": info.InstanceCount}, ret, nil
	case "DeviceGetMigDeviceHandleByIndex":
		if err := r.args(step, 2); err != nil {
			return fail(err)
		}
		index, err := r.integer(step.Args[1])
		if err != nil {
			return fail(err)
		}
		mig, ret := device.GetMigDeviceHandleByIndex(index)
		return mig, nil, ret, nil
	}
	if len(step.Args) < 2 {
		return fail(fmt.Errorf("takes a profile info argument"))
	}
	profile, err := r.giProfile(step.Args[1])
	if err != nil {
		return fail(err)
	}
	switch step.Call {
	case "DeviceGetGpuInstancePossiblePlacements":
		placements, ret := device.GetGpuInstancePossiblePlacements(profile)
		pairs := make([][2]uint32, 0, len(placements))
		for _, p := range placements {
			pairs = append(pairs, [2]uint32{p.Start, p.Size})
		}
		return placements, pairs, ret, r.args(step, 2)
	case "DeviceCreateGpuInstance":
		gi, ret := device.CreateGpuInstance(profile)
		return gi, nil, ret, r.args(step, 2)
	case "DeviceCreateGpuInstanceWithPlacement":
		if err := r.args(step, 3); err != nil {
			return fail(err)
		}
		placement, err := r.placement(step.Args[2])
		if err != nil {
			return fail(err)
		}
		gi, ret := device.CreateGpuInstanceWithPlacement(profile, placement)
		return gi, nil, ret, nil
	case "DeviceGetGpuInstances":
		gis, ret := device.GetGpuInstances(profile)
		return nil, len(gis), ret, r.args(step, 2)
	}
	return fail(fmt.Errorf("unknown call"))
}

func (r *nvmlScriptRun) gpuInstanceCall(step nvmlScriptStep, gi nvml.GpuInstance) (any, any, nvml.Return, error) {
	fail := func(err error) (any, any, nvml.Return, error) { return nil, nil, nvml.SUCCESS, err }
	switch step.Call {
	case "GpuInstanceGetInfo":
		info, ret := gi.GetInfo()
		return nil, map[string]uint32{"start": info.Placement.Start, "size": info.Placement.Size}, ret, r.args(step, 1)
	case "GpuInstanceDestroy":
		return nil, nil, gi.Destroy(), r.args(step, 1)
	case "GpuInstanceGetComputeInstanceProfileInfo":
		if err := r.args(step, 3); err != nil {
			return fail(err)
		}
		profile, err := r.integer(step.Args[1])
		if err != nil {
			return fail(err)
		}
		engine, err := r.integer(step.Args[2])
		if err != nil {
			return fail(err)
		}
		info, ret := gi.GetComputeInstanceProfileInfo(profile, engine)
		return info, map[string]uint32{"sliceCount": info.SliceCount}, ret, nil
	}
	if err := r.args(step, 2); err != nil {
		return fail(err)
	}
	profile, err := r.ciProfile(step.Args[1])
	if err != nil {
		return fail(err)
	}
	switch step.Call {
	case "GpuInstanceCreateComputeInstance":
		ci, ret := gi.CreateComputeInstance(profile)
		return ci, nil, ret, nil
	case "GpuInstanceGetComputeInstances":
		cis, ret := gi.GetComputeInstances(profile)
		return nil, len(cis), ret, nil
	}
	return fail(fmt.Errorf("unknown call"))
}
