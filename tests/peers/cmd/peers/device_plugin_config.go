package main

// device-plugin-config: a device-plugin config file as NVIDIA's device plugin (or GPU feature
// discovery) loads it at start (k8s-device-plugin v0.19.3): api/config/v1's NewConfig with the
// binary's flags and environment, the binary's own checks, and DisableResourceNamingInConfig.
// Prints the config the binary would run with ("Running with config:" in its log), or its error.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	spec "github.com/NVIDIA/k8s-device-plugin/api/config/v1"
	cli "github.com/urfave/cli/v2"
	"k8s.io/klog/v2"
)

type devicePluginConfigResult struct {
	Config   *spec.Config `json:"config"`
	Warnings []string     `json:"warnings"`
}

// validateDevicePluginFlags restates the device plugin's validateFlags (main.go, v0.19.3) with
// the api's own checks (NewDeviceListStrategies, AssertChannelIDsValid). Its CDI check asks
// whether the node has NVML; here every node has.
func validateDevicePluginFlags(config *spec.Config) error {
	if _, err := spec.NewDeviceListStrategies(*config.Flags.Plugin.DeviceListStrategy); err != nil {
		return fmt.Errorf("invalid --device-list-strategy option: %v", err)
	}
	if id := *config.Flags.Plugin.DeviceIDStrategy; id != spec.DeviceIDStrategyUUID && id != spec.DeviceIDStrategyIndex {
		return fmt.Errorf("invalid --device-id-strategy option: %v", id)
	}
	if config.Sharing.SharingStrategy() == spec.SharingStrategyMPS {
		if *config.Flags.MigStrategy == spec.MigStrategyMixed {
			return errors.New("using --mig-strategy=mixed is not supported with MPS")
		}
		if config.Flags.MpsRoot == nil || *config.Flags.MpsRoot == "" {
			return errors.New("using MPS requires --mps-root to be specified")
		}
	}
	switch *config.Flags.DeviceDiscoveryStrategy {
	case "auto", "nvml", "tegra":
	default:
		return fmt.Errorf("invalid --device-discovery-strategy option %v", *config.Flags.DeviceDiscoveryStrategy)
	}
	switch *config.Flags.MigStrategy {
	case spec.MigStrategyNone, spec.MigStrategySingle, spec.MigStrategyMixed:
	default:
		return fmt.Errorf("unknown MIG strategy: %v", *config.Flags.MigStrategy)
	}
	if err := spec.AssertChannelIDsValid(config.Imex.ChannelIDs); err != nil {
		return fmt.Errorf("invalid IMEX channel IDs: %w", err)
	}
	return nil
}

// validateGFDFlags restates GFD's validateFlags (cmd/gpu-feature-discovery/main.go, v0.19.3).
func validateGFDFlags(config *spec.Config) error {
	switch *config.Flags.DeviceDiscoveryStrategy {
	case "auto", "nvml", "tegra", "vfio":
		return nil
	}
	return fmt.Errorf("invalid --device-discovery-strategy option %v", *config.Flags.DeviceDiscoveryStrategy)
}

// loadLikeStart runs the binary's command line with --config-file and returns what its
// start() would run with: the device plugin's startPlugins (loadConfig, which drops the GFD
// flags; DisableResourceNamingInConfig; validateFlags) or GFD's start (loadConfig with its
// validateFlags; DisableResourceNamingInConfig). Error texts carry the binaries' own wrapping.
func loadLikeStart(path string, gfd bool) (*spec.Config, error) {
	table := devicePluginFlags
	if gfd {
		table = gfdFlags
	}
	flags := cliFlags(table)
	var config *spec.Config
	var failure error
	app := &cli.App{Name: "peer", Flags: flags, Writer: &bytes.Buffer{}, ErrWriter: &bytes.Buffer{}}
	app.Action = func(c *cli.Context) error {
		loaded, err := spec.NewConfig(c, flags)
		if err != nil {
			failure = fmt.Errorf("unable to load config: unable to finalize config: %v", err)
			if !gfd {
				failure = fmt.Errorf("error starting plugins: %v", failure)
			}
			return nil
		}
		if gfd {
			if err := validateGFDFlags(loaded); err != nil {
				failure = fmt.Errorf("unable to load config: unable to validate flags: %v", err)
				return nil
			}
			spec.DisableResourceNamingInConfig(loaded)
		} else {
			loaded.Flags.GFD = nil
			spec.DisableResourceNamingInConfig(loaded)
			if err := validateDevicePluginFlags(loaded); err != nil {
				failure = fmt.Errorf("error starting plugins: unable to validate flags: %v", err)
				return nil
			}
		}
		config = loaded
		return nil
	}
	if err := app.Run([]string{"peer", "--config-file", path}); err != nil {
		return nil, fmt.Errorf("command line: %v", err)
	}
	return config, failure
}

func init() {
	register("device-plugin-config", "FILE [--gfd] [--env NAME=VALUE]...", func(args []string) (any, error) {
		if len(args) == 0 {
			return nil, usagef("a device-plugin config file is required")
		}
		path, gfd := args[0], false
		for i := 1; i < len(args); i++ {
			switch {
			case args[i] == "--gfd":
				gfd = true
			case args[i] == "--env" && i+1 < len(args) && strings.Contains(args[i+1], "="):
				name, value, _ := strings.Cut(args[i+1], "=")
				// The environment the chart gives the container (templates/daemonset-*.yml).
				if err := os.Setenv(name, value); err != nil {
					return nil, usagef("--env %s: %v", args[i+1], err)
				}
				i++
			default:
				return nil, usagef("unknown argument %q", args[i])
			}
		}
		var log bytes.Buffer
		klog.LogToStderr(false)
		klog.SetOutput(&log)
		config, err := loadLikeStart(path, gfd)
		klog.Flush()
		if err != nil {
			return nil, err
		}
		warnings := []string{}
		for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
			if strings.HasPrefix(line, "W") {
				if _, message, ok := strings.Cut(line, "] "); ok {
					warnings = append(warnings, message)
				}
			}
		}
		return devicePluginConfigResult{Config: config, Warnings: warnings}, nil
	})
}
