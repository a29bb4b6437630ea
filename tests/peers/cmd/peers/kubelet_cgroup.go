package main

import (
	"fmt"
	"runtime"

	libcontainercgroups "github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"
)

// The kubelet reads the host's cgroup version while it validates its configuration
// (pkg/kubelet/apis/config/validation/validation_linux.go: failCgroupV1, true by default,
// refuses a cgroup v1 host), through opencontainers/cgroups IsCgroup2UnifiedMode, which
// statfs's /sys/fs/cgroup once and keeps the answer. The nodes these subcommands describe are
// cgroup v2 nodes, as every distribution the kubelet supports boots: on a cgroup v1 host that
// first statfs is made from a thread of its own in a private mount namespace with a cgroup2
// file system at /sys/fs/cgroup, so the kubelet's code judges the configuration and not the
// machine the tests run on. The thread ends with its namespace; the process stays in the
// host's (tools that act on processes by mount namespace never take it for something else).
const cgroupRoot = "/sys/fs/cgroup"

func asCgroupV2Node() error {
	var st unix.Statfs_t
	if err := unix.Statfs(cgroupRoot, &st); err == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		return nil
	}
	done := make(chan error, 1)
	go func() {
		// Locked and never unlocked: the runtime ends this thread when the goroutine returns,
		// so no other goroutine ever runs in the namespace made here.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			done <- fmt.Errorf("this host has cgroup v1; a private mount namespace to show the kubelet's checks cgroup v2 needs root: %w", err)
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			done <- fmt.Errorf("making the mount namespace private: %w", err)
			return
		}
		if err := unix.Mount("cgroup2", cgroupRoot, "cgroup2", 0, ""); err != nil {
			done <- fmt.Errorf("mounting cgroup2 at %s: %w", cgroupRoot, err)
			return
		}
		if !libcontainercgroups.IsCgroup2UnifiedMode() {
			done <- fmt.Errorf("cgroup2 mounted at %s, yet the cgroup library sees cgroup v1 (it was asked before)", cgroupRoot)
			return
		}
		done <- nil
	}()
	return <-done
}
