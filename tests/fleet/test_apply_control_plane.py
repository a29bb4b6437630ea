"""`gpuprov apply --kubeconfig` end to end on a real control plane: an SSH fleet whose nodes are
Nodes of the test control plane (tests/controlplane.py), the cluster side installed with the
real Helm client and kubernetes.core from a local chart repository serving upstream's charts
(tests/helm_repo.py: NVIDIA's device plugin chart 0.19.3, NFD's 0.19.0).

The node converge changes MIG on the H100 and the cluster side then installs both releases,
writes one config per node plan into the chart's ConfigMap and labels each node with its own;
the real DaemonSet controller puts the plugin on both nodes and the node agent publishes what
each advertises from the node's fake NVML under its config. A second apply changes nothing:
no node task changes, no new Helm revision, no plugin pod restarted."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_apply_fleet import MIG_BALANCED, TIME_SLICING, gpuprov_apply, mig_layout, small_fleet, summary_lines  # noqa: E402
from test_fleet import fleet_test  # noqa: E402

H100_BALANCED = ["1g.10gb@2", "1g.10gb@3", "2g.20gb@0", "3g.40gb@4"]
NAMESPACE = RELEASE = "nvidia-device-plugin"
CONFIG_LABEL = "nvidia.com/device-plugin.config"


@pytest.fixture(scope="module")
def charts(tmp_path_factory):
    import helm_repo
    repository = helm_repo.gpu_charts_repository(tmp_path_factory.mktemp("chart-repository"))
    yield repository
    repository.stop()


def cluster_variables(charts, cluster):
    import helm_repo
    return {"gpu_device_plugin_helm_binary": helm_repo.helm_binary(),
            "gpu_device_plugin_chart_repo_url": charts.url, "gpu_device_plugin_chart_repo_name": "gpuprov-test",
            # The served chart; gpuprov pins 0.20.0, which the module proxy does not serve.
            "gpu_device_plugin_chart_version": charts.charts["nvidia-device-plugin"],
            "gpu_device_plugin_nfd_chart_repo_url": charts.url, "gpu_device_plugin_nfd_chart_repo_name": "gpuprov-test-nfd",
            "gpu_device_plugin_wait_timeout": 120, "gpu_device_plugin_wait_delay": 1,
            "gpu_mig_poll_interval": 1, "gpu_mig_operand_timeout": 60, "gpu_mig_resources_timeout": 60,
            "gpuprov_drain_retry_delay": 1}


def plugin_pods(cluster):
    return dict((p.spec.node_name, p.metadata.uid) for p in cluster.core().list_namespaced_pod(NAMESPACE).items
                if not p.metadata.deletion_timestamp
                and [o.name for o in p.metadata.owner_references or []] == [RELEASE])


@fleet_test
@pytest.mark.control_plane
def test_apply_converges_the_nodes_and_installs_the_cluster_side_then_changes_nothing(tmp_path, cluster, charts):
    import helm_repo
    from gpuprov.planning import plan_inventory

    nodes = [{"name": "h100", "gpus": [{"model": "H100-80GB", "count": 1}]},
             {"name": "t4", "gpus": [{"model": "T4", "count": 1}]}]
    hosts = {"h100": {"gpuprov_gpu_model": "H100-80GB", "gpuprov_gpu_count": 1, "gpuprov_sharing": MIG_BALANCED},
             "t4": {"gpuprov_gpu_model": "T4", "gpuprov_gpu_count": 1, "gpuprov_sharing": TIME_SLICING}}
    with small_fleet(tmp_path, nodes, hosts, control_plane=cluster) as (fleet, inventories):
        plans = plan_inventory([inventories[1]]).result["nodes"]
        env = helm_repo.helm_env(tmp_path / "helm", fleet.controller_env())
        extra = json.dumps(cluster_variables(charts, cluster))

        code, output = gpuprov_apply(inventories, "--waves", "100%", "--kubeconfig", cluster.kubeconfig, "-e", extra,
                                     env=env)
        assert code == 0, output[-6000:]
        assert summary_lines(output)["h100"].startswith("changed"), output[-3000:]
        assert mig_layout(fleet.node("h100")) == {0: (True, H100_BALANCED)}
        releases = helm_repo.releases(env, cluster.kubeconfig)
        assert sorted(releases) == [("node-feature-discovery", "node-feature-discovery"), (NAMESPACE, RELEASE)]
        assert {r["status"] for r in releases.values()} == {"deployed"}
        for host, plan in plans.items():
            node = cluster.core().read_node(host)
            assert node.metadata.labels.get(CONFIG_LABEL) == plan["device_plugin"]["config_name"]
            assert not node.spec.unschedulable and "gpuprov.io/cordoned-by" not in (node.metadata.annotations or {})
            advertised = dict((k, int(v)) for k, v in node.status.allocatable.items()
                              if k.startswith("nvidia.com/") and v != "0")
            assert advertised == plan["resources"], (host, advertised)
        pods = plugin_pods(cluster)
        assert sorted(pods) == ["h100", "t4"]
        revisions = dict((key, r["revision"]) for key, r in releases.items())

        code, output = gpuprov_apply(inventories, "--waves", "100%", "--kubeconfig", cluster.kubeconfig, "-e", extra,
                                     env=env)
        assert code == 0, output[-6000:]
        # The nodes and the cluster side (run on the controller, "localhost").
        assert dict((host, line.split()[0]) for host, line in summary_lines(output).items()) == {
            "h100": "unchanged", "t4": "unchanged", "localhost": "unchanged"}, output[-3000:]
        assert dict((key, r["revision"]) for key, r in helm_repo.releases(env, cluster.kubeconfig).items()) == revisions
        assert plugin_pods(cluster) == pods
