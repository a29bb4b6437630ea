package main

// The kubelet's start-up up to the point where its configuration is final: flag parsing, the
// config file, the --config-dir drop-ins, flag precedence, feature gates and validation, as
// NewKubeletCommand runs them (k8s.io/kubernetes v1.37.2, cmd/kubelet/app/server.go).
//
// cmd/kubelet/app is a library package, but the steps it takes are unexported functions
// (loadConfigFile, mergeKubeletConfigurations, kubeletConfigFlagPrecedence, newFakeFlagSet,
// newFlagSetWithGlobals, convertToVersionedKubeletConfig, getReservedCPUs, parseResourceList)
// inside the cobra command's RunE, which goes on to run the kubelet. Each one is rebuilt here
// from the exported parts it calls, statement for statement; tests/test_kubelet_peer_sources.py holds
// their source text in the module cache against the hashes recorded there, so a new release
// that changes one of them fails that test instead of drifting silently.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	cadvisorapi "github.com/google/cadvisor/lib/model"
	"github.com/spf13/pflag"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/kubernetes/cmd/kubelet/app/options"
	kubeletconfiginternal "k8s.io/kubernetes/pkg/kubelet/apis/config"
	kubeletscheme "k8s.io/kubernetes/pkg/kubelet/apis/config/scheme"
	kubeletconfigv1beta1conversion "k8s.io/kubernetes/pkg/kubelet/apis/config/v1beta1"
	kubeletconfigvalidation "k8s.io/kubernetes/pkg/kubelet/apis/config/validation"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/topology"
	"k8s.io/kubernetes/pkg/kubelet/eviction"
	"k8s.io/kubernetes/pkg/kubelet/kubeletconfig/configfiles"
	"k8s.io/kubernetes/pkg/kubelet/stats/pidlimit"
	utilfs "k8s.io/kubernetes/pkg/util/filesystem"
	"k8s.io/utils/cpuset"
)

// cmd/kubelet/app's init registers the logging feature gates with the kubelet's gate; it is
// done once here, unless something else in this binary has done it already.
func init() {
	if _, known := utilfeature.DefaultMutableFeatureGate.GetAll()[logsapi.ContextualLogging]; !known {
		utilruntime.Must(logsapi.AddFeatureGates(utilfeature.DefaultMutableFeatureGate))
	}
}

// kubeletArgs splits a subcommand's arguments into the peer's own options (named in own, each
// taking a value, and repeatable) and the rest, which are kubelet command-line flags.
func kubeletArgs(args []string, own ...string) (map[string][]string, []string, error) {
	values := map[string][]string{}
	var rest []string
	for i := 0; i < len(args); i++ {
		arg := args[i]
		matched := false
		for _, name := range own {
			flag := "--" + name
			if arg == flag {
				if i+1 >= len(args) {
					return nil, nil, usagef("%s needs a value", flag)
				}
				values[name] = append(values[name], args[i+1])
				i++
				matched = true
			} else if strings.HasPrefix(arg, flag+"=") {
				values[name] = append(values[name], strings.TrimPrefix(arg, flag+"="))
				matched = true
			}
		}
		if !matched {
			rest = append(rest, arg)
		}
	}
	return values, rest, nil
}

// lastValue is the value of a peer option given once (the last one wins), or "".
func lastValue(values map[string][]string, name string) string {
	if list := values[name]; len(list) > 0 {
		return list[len(list)-1]
	}
	return ""
}

// loadedKubelet is the kubelet's configuration once NewKubeletCommand has made it final.
type loadedKubelet struct {
	flags  *options.KubeletFlags
	config *kubeletconfiginternal.KubeletConfiguration
}

// loadKubelet runs NewKubeletCommand's RunE on args (kubelet flags such as --config,
// --config-dir, --kube-reserved=...) up to and including ValidateKubeletConfiguration. Errors
// carry the kubelet's own wrapping ("failed to load kubelet config file, path: ...").
func loadKubelet(ctx context.Context, args []string) (loaded *loadedKubelet, err error) {
	// The kubelet's defaulting panics on some inputs (a feature gate locked to its default and
	// set to the other value); the kubelet then dies with that panic.
	defer func() {
		if recovered := recover(); recovered != nil {
			loaded, err = nil, fmt.Errorf("the kubelet panics: %v", recovered)
		}
	}()
	cleanFlagSet := pflag.NewFlagSet("kubelet", pflag.ContinueOnError)
	cleanFlagSet.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	cleanFlagSet.SetOutput(io.Discard)
	kubeletFlags := options.NewKubeletFlags()
	kubeletConfig, err := options.NewKubeletConfiguration()
	if err != nil {
		return nil, err
	}
	kubeletFlags.AddFlags(cleanFlagSet)
	options.AddKubeletConfigFlags(cleanFlagSet, kubeletConfig)
	options.AddGlobalFlags(cleanFlagSet)
	cleanFlagSet.BoolP("help", "h", false, "help for kubelet")

	if err := cleanFlagSet.Parse(args); err != nil {
		return nil, fmt.Errorf("failed to parse kubelet flag: %w", err)
	}
	if cmds := cleanFlagSet.Args(); len(cmds) > 0 {
		return nil, fmt.Errorf("unknown command %+s", cmds[0])
	}
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(kubeletConfig.FeatureGates); err != nil {
		return nil, fmt.Errorf("failed to set feature gates from initial flags-based config: %w", err)
	}
	if err := options.ValidateKubeletFlags(kubeletFlags); err != nil {
		return nil, fmt.Errorf("failed to validate kubelet flags: %w", err)
	}
	if len(kubeletFlags.KubeletConfigFile) > 0 {
		kubeletConfig, err = loadConfigFile(ctx, kubeletFlags.KubeletConfigFile)
		if err != nil {
			return nil, fmt.Errorf("failed to load kubelet config file, path: %s, error: %w", kubeletFlags.KubeletConfigFile, err)
		}
	}
	if len(kubeletFlags.KubeletDropinConfigDirectory) > 0 {
		if _, err := mergeKubeletConfigurations(kubeletConfig, kubeletFlags.KubeletDropinConfigDirectory); err != nil {
			return nil, fmt.Errorf("failed to merge kubelet configs: %w", err)
		}
	}
	if len(kubeletFlags.KubeletConfigFile) > 0 || len(kubeletFlags.KubeletDropinConfigDirectory) > 0 {
		if err := kubeletConfigFlagPrecedence(kubeletConfig, args); err != nil {
			return nil, fmt.Errorf("failed to precedence kubeletConfigFlag: %w", err)
		}
		if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(kubeletConfig.FeatureGates); err != nil {
			return nil, fmt.Errorf("failed to set feature gates from initial flags-based config: %w", err)
		}
	}
	logs.InitLogs()
	if err := logsapi.ValidateAndApplyAsField(&kubeletConfig.Logging, utilfeature.DefaultFeatureGate, field.NewPath("logging")); err != nil {
		return nil, fmt.Errorf("initialize logging: %v", err)
	}
	// The kubelet appends the whole configuration (", path: %s" with the struct) to this
	// message; the struct is left out here, the error text is the kubelet's.
	if err := kubeletconfigvalidation.ValidateKubeletConfiguration(kubeletConfig, utilfeature.DefaultFeatureGate); err != nil {
		return nil, fmt.Errorf("failed to validate kubelet configuration, error: %w", err)
	}
	return &loadedKubelet{flags: kubeletFlags, config: kubeletConfig}, nil
}

// loadConfigFile is cmd/kubelet/app's loadConfigFile: the main file decoded (and defaulted)
// by the kubelet's codecs, then the eviction defaults applied to it, before any drop-in.
func loadConfigFile(ctx context.Context, name string) (*kubeletconfiginternal.KubeletConfiguration, error) {
	const errFmt = "failed to load Kubelet config file %s, error %v"
	kubeletConfigFile, err := filepath.Abs(name)
	if err != nil {
		return nil, fmt.Errorf(errFmt, name, err)
	}
	loader, err := configfiles.NewFsLoader(&utilfs.DefaultFs{}, kubeletConfigFile)
	if err != nil {
		return nil, fmt.Errorf(errFmt, name, err)
	}
	kc, err := loader.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf(errFmt, name, err)
	}
	if kc.EvictionHard == nil {
		kc.EvictionHard = eviction.DefaultEvictionHard
	} else if kc.MergeDefaultEvictionSettings {
		for k, v := range eviction.DefaultEvictionHard {
			if _, exists := kc.EvictionHard[k]; !exists {
				kc.EvictionHard[k] = v
			}
		}
	}
	return kc, err
}

// mergeKubeletConfigurations is cmd/kubelet/app's: every *.conf under the directory
// (subfolders too, in filepath.WalkDir's lexical order) merged as a JSON merge patch over the
// v1beta1 form of the configuration so far, then defaulted once more.
func mergeKubeletConfigurations(kubeletConfig *kubeletconfiginternal.KubeletConfiguration, kubeletDropInConfigDir string) ([]string, error) {
	const dropinFileExtension = ".conf"
	var skippedFiles []string
	versionedConfig := &kubeletconfigv1beta1.KubeletConfiguration{}
	if err := kubeletconfigv1beta1conversion.Convert_config_KubeletConfiguration_To_v1beta1_KubeletConfiguration(kubeletConfig, versionedConfig, nil); err != nil {
		return nil, err
	}
	baseKubeletConfigJSON, err := json.Marshal(versionedConfig)
	if err != nil {
		return nil, fmt.Errorf("failed to marshal base config: %w", err)
	}
	if err := filepath.WalkDir(kubeletDropInConfigDir, func(path string, info fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() {
			return nil
		}
		if filepath.Ext(info.Name()) != dropinFileExtension {
			skippedFiles = append(skippedFiles, path)
			return nil
		}
		dropinConfigJSON, gvk, err := loadDropinConfigFileIntoJSON(path)
		if err != nil {
			return fmt.Errorf("failed to load kubelet dropin file, path: %s, error: %w", path, err)
		}
		if gvk == nil || gvk.Empty() {
			return fmt.Errorf("failed to load kubelet dropin file, path: %s, no apiVersion/kind", path)
		}
		if *gvk != kubeletconfigv1beta1.SchemeGroupVersion.WithKind("KubeletConfiguration") {
			return fmt.Errorf("failed to load kubelet dropin file, path: %s, unknown apiVersion/kind: %v", path, gvk.String())
		}
		mergedConfigJSON, err := jsonpatch.MergePatch(baseKubeletConfigJSON, dropinConfigJSON)
		if err != nil {
			return fmt.Errorf("failed to merge drop-in and current config: %w", err)
		}
		baseKubeletConfigJSON = mergedConfigJSON
		return nil
	}); err != nil {
		return nil, fmt.Errorf("failed to walk through kubelet dropin directory %q: %w", kubeletDropInConfigDir, err)
	}
	versionedConfig = &kubeletconfigv1beta1.KubeletConfiguration{}
	if err := json.Unmarshal(baseKubeletConfigJSON, versionedConfig); err != nil {
		return nil, fmt.Errorf("failed to unmarshal merged JSON into kubelet configuration: %w", err)
	}
	kubeletconfigv1beta1conversion.SetDefaults_KubeletConfiguration(versionedConfig)
	if err := kubeletconfigv1beta1conversion.Convert_v1beta1_KubeletConfiguration_To_config_KubeletConfiguration(versionedConfig, kubeletConfig, nil); err != nil {
		return nil, fmt.Errorf("failed to convert merged config to internal kubelet configuration: %w", err)
	}
	return skippedFiles, nil
}

func loadDropinConfigFileIntoJSON(name string) ([]byte, *schema.GroupVersionKind, error) {
	const errFmt = "failed to load drop-in kubelet config file %s, error %v"
	kubeletConfigFile, err := filepath.Abs(name)
	if err != nil {
		return nil, nil, fmt.Errorf(errFmt, name, err)
	}
	loader, err := configfiles.NewFsLoader(&utilfs.DefaultFs{}, kubeletConfigFile)
	if err != nil {
		return nil, nil, fmt.Errorf(errFmt, name, err)
	}
	return loader.LoadIntoJSON()
}

func newFlagSetWithGlobals() *pflag.FlagSet {
	fs := pflag.NewFlagSet("", pflag.ExitOnError)
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	options.AddGlobalFlags(fs)
	return fs
}

func newFakeFlagSet(fs *pflag.FlagSet) *pflag.FlagSet {
	ret := pflag.NewFlagSet("", pflag.ExitOnError)
	ret.SetNormalizeFunc(fs.GetNormalizeFunc())
	fs.VisitAll(func(f *pflag.Flag) {
		ret.VarP(cliflag.NoOp{}, f.Name, f.Shorthand, f.Usage)
	})
	return ret
}

// kubeletConfigFlagPrecedence re-parses the command line over the loaded configuration: a
// flag wins over the files, and a map flag (--kube-reserved=memory=1Gi) replaces the whole map.
func kubeletConfigFlagPrecedence(kc *kubeletconfiginternal.KubeletConfiguration, args []string) error {
	fs := newFakeFlagSet(newFlagSetWithGlobals())
	options.NewKubeletFlags().AddFlags(fs)
	options.AddKubeletConfigFlags(fs, kc)
	original := kc.FeatureGates
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return err
	}
	for k, v := range original {
		if _, ok := kc.FeatureGates[k]; !ok {
			kc.FeatureGates[k] = v
		}
	}
	return nil
}

// convertToVersionedKubeletConfig is the conversion /configz serves. The generated
// conversion shares the map fields (kubeReserved, systemReserved, evictionHard) with the
// internal object, which is how the reserved-CPU rewrite below reaches /configz.
func convertToVersionedKubeletConfig(kc *kubeletconfiginternal.KubeletConfiguration) (*kubeletconfigv1beta1.KubeletConfiguration, error) {
	scheme, _, err := kubeletscheme.NewSchemeAndCodecs()
	if err != nil {
		return nil, err
	}
	versioned := &kubeletconfigv1beta1.KubeletConfiguration{}
	if err := scheme.Convert(kc, versioned, nil); err != nil {
		return nil, err
	}
	versioned.GetObjectKind().SetGroupVersionKind(kubeletconfigv1beta1.SchemeGroupVersion.WithKind("KubeletConfiguration"))
	return versioned, nil
}

// getReservedCPUs is cmd/kubelet/app's: reservedSystemCPUs parsed and checked against the
// machine's CPUs.
func getReservedCPUs(logger klog.Logger, machineInfo *cadvisorapi.MachineInfo, cpus string) (cpuset.CPUSet, error) {
	emptyCPUSet := cpuset.New()
	if cpus == "" {
		return emptyCPUSet, nil
	}
	topo, err := topology.Discover(logger, machineInfo)
	if err != nil {
		return emptyCPUSet, fmt.Errorf("unable to discover CPU topology info: %s", err)
	}
	reservedCPUSet, err := cpuset.Parse(cpus)
	if err != nil {
		return emptyCPUSet, fmt.Errorf("unable to parse reserved-cpus list: %s", err)
	}
	allCPUSet := topo.CPUDetails.CPUs()
	if !reservedCPUSet.IsSubsetOf(allCPUSet) {
		return emptyCPUSet, fmt.Errorf("reserved-cpus: %s is not a subset of online-cpus: %s", cpus, allCPUSet.String())
	}
	return reservedCPUSet, nil
}

// rewriteReservedCPUs is what run() does once the configuration is registered with /configz:
// with reservedSystemCPUs set, kubeReserved loses its cpu and systemReserved.cpu becomes the
// number of reserved CPUs. A systemReserved map that did not exist is created anew, so
// /configz (which shares the old, nil map) does not show it.
func rewriteReservedCPUs(kc *kubeletconfiginternal.KubeletConfiguration, reserved cpuset.CPUSet) {
	if reserved.Size() == 0 {
		return
	}
	if kc.KubeReserved != nil {
		delete(kc.KubeReserved, "cpu")
	}
	if kc.SystemReserved == nil {
		kc.SystemReserved = make(map[string]string)
	}
	kc.SystemReserved["cpu"] = strconv.Itoa(reserved.Size())
}

// parseResourceList is cmd/kubelet/app's: kube/system reserved as quantities, CPU rounded to
// whole millicores.
func parseResourceList(m map[string]string) (v1.ResourceList, error) {
	if len(m) == 0 {
		return nil, nil
	}
	rl := make(v1.ResourceList)
	for k, v := range m {
		switch v1.ResourceName(k) {
		case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage, pidlimit.PIDs:
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return nil, fmt.Errorf("failed to parse quantity %q for %q resource: %w", v, k, err)
			}
			if q.Sign() == -1 {
				return nil, fmt.Errorf("resource quantity for %q cannot be negative: %v", k, v)
			}
			if v1.ResourceName(k) == v1.ResourceCPU {
				q.SetMilli((q.ScaledValue(resource.Micro) + 500) / 1000)
			}
			rl[v1.ResourceName(k)] = q
		default:
			return nil, fmt.Errorf("cannot reserve %q resource", k)
		}
	}
	return rl, nil
}

// readMachine reads a machine description in cAdvisor's MachineInfo JSON (what the kubelet's
// managers are given): num_cores, num_sockets, memory_capacity, hugepages and topology, one
// entry per NUMA node with its memory and cores (thread_ids, socket_id).
func readMachine(path string) (*cadvisorapi.MachineInfo, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	machine := &cadvisorapi.MachineInfo{}
	decoder := json.NewDecoder(strings.NewReader(string(data)))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(machine); err != nil {
		return nil, fmt.Errorf("machine %s: %w", path, err)
	}
	if machine.NumCores == 0 || len(machine.Topology) == 0 {
		return nil, errors.New("machine " + path + ": needs num_cores and a topology (NUMA nodes with their cores)")
	}
	return machine, nil
}
