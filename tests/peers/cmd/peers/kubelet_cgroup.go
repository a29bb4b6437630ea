package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// The kubelet reads the host's cgroup version while it validates its configuration
// (pkg/kubelet/apis/config/validation/validation_linux.go: failCgroupV1, true by default,
// refuses a cgroup v1 host). The nodes these subcommands describe are cgroup v2 nodes, as
// every distribution the kubelet supports boots: on a cgroup v1 host the subcommand runs again
// in a private mount namespace that has a cgroup2 file system at /sys/fs/cgroup, so the
// kubelet's code judges the configuration and not the machine the tests run on.
const cgroupNamespaceEnv = "GPUPROV_PEERS_CGROUP2_NAMESPACE"

const cgroupRoot = "/sys/fs/cgroup"

// asCgroupV2Node returns once this process sees cgroup v2 at /sys/fs/cgroup. On a cgroup v1
// host it re-runs the command in a new mount namespace and exits with that run's status.
func asCgroupV2Node() error {
	if os.Getenv(cgroupNamespaceEnv) == "1" {
		// Inside the new namespace: keep every mount change in it, then mount cgroup2.
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return fmt.Errorf("making the mount namespace private: %w", err)
		}
		if err := unix.Mount("cgroup2", cgroupRoot, "cgroup2", 0, ""); err != nil {
			return fmt.Errorf("mounting cgroup2 at %s: %w", cgroupRoot, err)
		}
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(cgroupRoot, &st); err == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		return nil
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Env = append(os.Environ(), cgroupNamespaceEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		os.Exit(exit.ExitCode())
	}
	if err != nil {
		return fmt.Errorf("this host has cgroup v1; running the kubelet's checks as on a cgroup v2 node needs a private mount namespace (root): %w", err)
	}
	os.Exit(0)
	return nil
}
