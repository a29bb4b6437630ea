# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Every gpuprov_* variable the collection knows: those a node's plan reads and those the
playbooks read or set. intent.check_variables refuses any other gpuprov_* name as a typo."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# The gpuprov_* variables a node's plan reads.
INTENT_VARS = ("gpuprov_gpu_model", "gpuprov_gpu_count", "gpuprov_gpus", "gpuprov_sharing",
               "gpuprov_mig_config_file", "gpuprov_kubelet", "gpuprov_node_name", "gpuprov_catalog_file")
# Other gpuprov_* variables the playbooks read or set: run settings given by the CLI (-e) or
# the inventory, and facts and registered results of the playbooks themselves. A test
# (tests/unit/plugins/plugin_utils/test_known_vars.py) derives the ones users may set from
# the playbooks and roles, so a new one cannot be forgotten here.
RUN_VARS = ("gpuprov_kubeconfig", "gpuprov_kube_context", "gpuprov_sysfs_root", "gpuprov_drain_timeout",
            "gpuprov_kubelet_healthz_host", "gpuprov_waves", "gpuprov_max_fail_percentage", "gpuprov_hosts",
            "gpuprov_cli_catalog_file", "gpuprov_cluster_side",
            # drains and waves (site.yml)
            "gpuprov_wave_max_nodes", "gpuprov_allow_undrained", "gpuprov_drain_retry_delay",
            "gpuprov_drain_delete_emptydir_data", "gpuprov_drain_force",
            "gpuprov_status_dir", "gpuprov_status_fail_on_drift",
            # baseline record / start / collect / stop
            "gpuprov_baseline_duration", "gpuprov_baseline_interval", "gpuprov_baseline_dest",
            "gpuprov_baseline_hosts", "gpuprov_baseline_query", "gpuprov_baseline_dir", "gpuprov_baseline_program",
            "gpuprov_baseline_python", "gpuprov_baseline_max_bytes", "gpuprov_baseline_keep",
            "gpuprov_baseline_unit_dir", "gpuprov_baseline_remove_samples",
            # set by the playbooks themselves (set_fact, register, task vars)
            "gpuprov_plan", "gpuprov_node_changes", "gpuprov_status", "gpuprov_status_mps",
            "gpuprov_status_kubelet", "gpuprov_drain_needed", "gpuprov_can_drain",
            "gpuprov_baseline_scratch", "gpuprov_baseline_run", "gpuprov_baseline_files",
            "gpuprov_baseline_program_file", "gpuprov_baseline_unit_file", "gpuprov_baseline_unit",
            "gpuprov_baseline_exec_start", "gpuprov_cordoned_by_run", "gpuprov_node_before",
            "gpuprov_drain_pods", "gpuprov_mps_probe", "gpuprov_node_failure")
KNOWN_VARS = frozenset(INTENT_VARS + RUN_VARS)
