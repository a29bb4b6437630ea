"""`gpuprov export`: the fleet plan as files other tools read.

Every kind renders through the collection's plugin_utils (device_plugin_configs, node_labels,
helm_values, migparted_export, hami_cluster, dra), the same code the gpu_device_plugin role
applies with, so an export and a role run never disagree.
"""
import os
import tempfile

import click

from gpuprov import options, render
from gpuprov.planning import load_plans
from gpuprov.errors import EXIT_FAILED, fail_bad_input

KINDS = ("device-plugin", "mig-parted", "helm-values", "hami", "dra")


class ExportFile:
    """One output file: a name, its text, and whether it belongs on stdout too."""

    def __init__(self, name, text, executable=False, stdout=True):
        self.name = name
        self.text = text
        self.executable = executable
        self.stdout = stdout


def _node_names(nodes):
    """host -> Kubernetes node name (gpuprov_node_name, else the host name) for every plan."""
    return dict((host, plan.get("node_name", host)) for host, plan in nodes.items())


def _yaml_file(name, comment_lines, documents):
    header = "".join("# %s\n" % line for line in comment_lines)
    body = "---\n".join(render.to_yaml(doc) for doc in documents)
    return ExportFile(name, header + body)


def _device_plugin_files(fleet, configs, namespace, default_config):
    from ansible_collections.gpuprov.gpu.plugins.plugin_utils import device_plugin_configs, node_labels

    nodes = fleet.result["nodes"]
    configmap = device_plugin_configs.device_plugin_configmap(
        nodes, configs, default_config=default_config,
        namespace=namespace or device_plugin_configs.DEVICE_PLUGIN_NAMESPACE)
    patches = node_labels.node_label_patches(nodes, _node_names(nodes))
    name = configmap["metadata"]["name"]
    return [
        _yaml_file("device-plugin-configmap.yaml", [
            "NVIDIA device-plugin configs, one per distinct node plan (gpuprov export device-plugin).",
            "nvidia-device-plugin chart: --set config.name=%s --set config.default=%s" % (name, default_config),
            "GPU Operator: devicePlugin.config.name=%s, devicePlugin.config.default=%s" % (name, default_config),
            "The plugin does not watch this ConfigMap: restart its DaemonSet after changing it.",
        ], [configmap]),
        _yaml_file("node-labels.yaml", [
            "Each node's device-plugin config label. Apply with",
            "  kubectl apply --server-side --field-manager=gpuprov -f node-labels.yaml",
            "(server-side apply owns only these labels) or run label-nodes.sh.",
        ], patches),
        ExportFile("label-nodes.sh", node_labels.shell_script(
            node_labels.kubectl_label_commands(patches),
            "Label each node with its device-plugin config (gpuprov export device-plugin)."),
            executable=True, stdout=False),
    ]


def _mig_parted_files(fleet, namespace):
    from ansible_collections.gpuprov.gpu.plugins.plugin_utils import migparted_export, node_labels

    document, assignment = migparted_export.mig_parted_export(fleet.result["nodes"])
    if not assignment:
        fail_bad_input(["no planned node has MIG-capable GPUs; there is nothing to export for mig-parted"])
    patches = migparted_export.mig_config_label_patches(assignment, _node_names(fleet.result["nodes"]))
    configmap = migparted_export.mig_parted_configmap(document, namespace=namespace or migparted_export.GPU_OPERATOR_NAMESPACE)
    return [
        _yaml_file("mig-parted.yaml", [
            "MIG geometry per node plan, in NVIDIA mig-parted's format (gpuprov export mig-parted).",
            "nvidia-mig-parted apply -f mig-parted.yaml -c <name>; names are derived from the content.",
            "mig-parted picks its own placements; gpuprov's planned placements are in `gpuprov plan`.",
        ], [document]),
        _yaml_file("mig-parted-configmap.yaml", [
            "The same config for the GPU Operator's MIG manager:",
            "  migManager.config.name=%s (key %s)" % (configmap["metadata"]["name"], migparted_export.MIG_PARTED_CONFIGMAP_KEY),
        ], [configmap]),
        _yaml_file("mig-config-labels.yaml", [
            "Each node's %s label; the MIG manager reconfigures a node when it changes." % migparted_export.MIG_CONFIG_LABEL,
            "  kubectl apply --server-side --field-manager=gpuprov -f mig-config-labels.yaml",
        ], patches),
        ExportFile("label-mig-config.sh", node_labels.shell_script(
            node_labels.kubectl_label_commands(patches),
            "Select each node's MIG config for the MIG manager (gpuprov export mig-parted)."),
            executable=True, stdout=False),
    ]


def _helm_values_files(fleet, configs, namespace, default_config):
    from ansible_collections.gpuprov.gpu.plugins.plugin_utils import device_plugin_configs, helm_values, node_labels

    nodes = fleet.result["nodes"]
    namespace = namespace or device_plugin_configs.DEVICE_PLUGIN_NAMESPACE
    plugin_values = helm_values.device_plugin_values(nodes, configs, default_config=default_config)
    nfd_ref = helm_values.chart_ref(helm_values.NFD_CHART_REPO, "nfd", helm_values.NFD_CHART_NAME)[0]
    plugin_ref = helm_values.chart_ref(helm_values.DEVICE_PLUGIN_CHART_REPO, "nvdp", helm_values.DEVICE_PLUGIN_CHART_NAME)[0]
    nfd_cmd = helm_values.helm_command(helm_values.NFD_CHART_NAME, nfd_ref, helm_values.NFD_CHART_VERSION,
                                       helm_values.NFD_NAMESPACE, "nfd-values.yaml")
    plugin_cmd = helm_values.helm_command(helm_values.DEVICE_PLUGIN_CHART_NAME, plugin_ref,
                                          helm_values.DEVICE_PLUGIN_CHART_VERSION, namespace,
                                          "nvidia-device-plugin-values.yaml")
    install = node_labels.shell_script([
        ["helm", "repo", "add", "--force-update", "nvdp", helm_values.DEVICE_PLUGIN_CHART_REPO],
        nfd_cmd,
        plugin_cmd,
    ], "Install NFD and the NVIDIA device plugin with these values (gpuprov export helm-values).",
        preamble=['cd -- "$(dirname -- "$0")"'])
    return [
        _yaml_file("nfd-values.yaml", [
            "node-feature-discovery %s values (gpuprov export helm-values)." % helm_values.NFD_CHART_VERSION,
            "  " + " ".join(nfd_cmd),
        ], [helm_values.nfd_values()]),
        _yaml_file("nvidia-device-plugin-values.yaml", [
            "nvidia-device-plugin %s values with the fleet's configs (gpuprov export helm-values)."
            % helm_values.DEVICE_PLUGIN_CHART_VERSION,
            "  " + " ".join(plugin_cmd),
            "Label the nodes too: gpuprov export device-plugin writes the labels.",
        ], [plugin_values]),
        ExportFile("helm-install.sh", install, executable=True, stdout=False),
    ]


def _hami_files(fleet, namespace):
    from ansible_collections.gpuprov.gpu.plugins.plugin_utils import hami_cluster, helm_values, node_labels
    from ansible_collections.gpuprov.gpu.plugins.plugin_utils.cluster_render_error import ClusterRenderError

    nodes = fleet.result["nodes"]
    if not hami_cluster.hami_hosts(nodes):
        fail_bad_input(["no planned node uses strategy hami; there is nothing to export for HAMi"])
    namespace = namespace or hami_cluster.NAMESPACE
    try:
        node_names = _node_names(nodes)
        configmap = hami_cluster.configmap(nodes, node_names, namespace=namespace)
        patches = hami_cluster.label_patches(nodes, node_names)
        values = hami_cluster.values(nodes, node_names)
    except hami_cluster.HamiRenderError as exc:
        raise ClusterRenderError(exc.problems)
    chart = "%s/%s" % (hami_cluster.CHART_REPO_NAME, hami_cluster.CHART_NAME)
    helm = helm_values.helm_command(hami_cluster.RELEASE_NAME, chart, hami_cluster.CHART_VERSION, namespace,
                                    "hami-values.yaml")
    install = node_labels.shell_script(
        [["kubectl", "apply", "--server-side", "--field-manager=gpuprov", "-f", "hami-device-plugin-configmap.yaml"]]
        + hami_cluster.kubectl_label_commands(patches)
        + [["helm", "repo", "add", "--force-update", hami_cluster.CHART_REPO_NAME, hami_cluster.CHART_REPO], helm],
        "HAMi: per-node config, gpu=on labels, then the chart (gpuprov export hami).",
        preamble=['cd -- "$(dirname -- "$0")"'])
    return [
        _yaml_file("hami-device-plugin-configmap.yaml", [
            "HAMi device-plugin config, one nodeconfig entry per HAMi node (gpuprov export hami).",
            "The chart reads it through devicePlugin.nodeConfiguration.externalConfigName=%s." % hami_cluster.CONFIGMAP_NAME,
            "HAMi's plugin reads it at start: the values' pod annotation changes with it, so the DaemonSet rolls.",
        ], [configmap]),
        _yaml_file("hami-node-labels.yaml", [
            "gpu=on on HAMi nodes (HAMi's plugin runs only there); gpu removed (null) on the other planned nodes.",
            "These are JSON merge patches (null removes a label): kubectl patch node NAME --type merge, or run",
            "hami-install.sh, which labels with kubectl label (gpu- removes).",
            "The NVIDIA device plugin stays off gpu=on nodes: gpuprov export helm-values adds that affinity.",
        ], patches),
        _yaml_file("hami-values.yaml", [
            "hami chart %s values from the plan (gpuprov export hami)." % hami_cluster.CHART_VERSION,
            "  " + " ".join(helm),
        ], [values]),
        ExportFile("hami-install.sh", install, executable=True, stdout=False),
    ]


def _model_lookup(catalog_file):
    """model key -> GpuModel from the built-in catalog and --catalog (None when in neither)."""
    from ansible_collections.gpuprov.gpu.plugins.plugin_utils import catalog
    from gpuprov.planning import PlanningFailed, load_user_catalog

    try:
        user = load_user_catalog(catalog_file)
    except PlanningFailed as exc:
        fail_bad_input(exc.problems)

    def model_for(key):
        try:
            return user.get(key) if user is not None else catalog.get(key)
        except KeyError:
            return None
    return model_for


def _dra_files(fleet, catalog_file):
    from ansible_collections.gpuprov.gpu.plugins.plugin_utils import dra
    from ansible_collections.gpuprov.gpu.plugins.plugin_utils.cluster_render_error import ClusterRenderError
    from ansible_collections.gpuprov.gpu.plugins.plugin_utils.intent import escape

    nodes = fleet.result["nodes"]
    try:
        rendered = dra.export(nodes, _model_lookup(catalog_file), _node_names(nodes))
    except dra.DraRenderError as exc:
        raise ClusterRenderError(exc.problems)
    head = [
        "What NVIDIA's DRA driver (gpu.nvidia.com, %s, static MIG) publishes for each planned node"
        % dra.DRIVER_RELEASE,
        "(gpuprov export dra): one pool per node, named after it. Compare with a cluster's",
        "  kubectl get resourceslices -o yaml   (gpuprov diagnose and pool read them),",
        "or create them on a test cluster without the driver (kubectl create -f). The driver itself",
        "adds uuid, brand, driver/CUDA versions, PCI attributes and MIG engine counts; these are",
        "not in a plan. Names are fixed here; the driver's slices get generated names.",
        "The driver's chart refuses to run its GPU plugin beside NVIDIA's device plugin on one node.",
    ]
    parts = []
    for host in sorted(rendered["slices"]):
        notes = ["%s: %s" % (_node_names(nodes)[host], escape(note)) for note in rendered["notes"][host]]
        for number, resource_slice in enumerate(rendered["slices"][host]):
            comment = "".join("# %s\n" % line for line in (notes if number == 0 else []))
            devices = resource_slice["spec"].get("devices") or []
            comment += "# %s: %s\n" % (resource_slice["spec"]["nodeName"], dra.device_summary(devices))
            parts.append(comment + render.to_yaml(resource_slice))
    slices = ExportFile("dra-resourceslices.yaml", "".join("# %s\n" % line for line in head) + "---\n".join(parts))
    files = [slices]
    if rendered["classes"]:
        files.append(_yaml_file("dra-deviceclasses.yaml", [
            "The DeviceClasses the planned devices belong to, as the driver's chart %s installs them"
            % dra.DRIVER_RELEASE,
            "(templates/deviceclass-gpu.yaml, deviceclass-mig.yaml). The chart owns them on a cluster",
            "that runs the driver; apply these only where it does not (a test cluster).",
        ], rendered["classes"]))
    return files


def write_atomically(directory, export_file):
    """Write one file with a temp file + rename; returns False when the content was already there."""
    path = os.path.join(directory, export_file.name)
    mode = 0o755 if export_file.executable else 0o644
    try:
        with open(path) as handle:
            if handle.read() == export_file.text and (os.stat(path).st_mode & 0o777) == mode:
                return False
    except OSError:
        pass
    fd, tmp = tempfile.mkstemp(prefix=".%s." % export_file.name, dir=directory)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(export_file.text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return True


@click.command()
@options.inventory_options
@options.reading_options
@options.catalog_option
@options.trust_ansible_cfg_option
@click.argument("kind", type=click.Choice(KINDS))
@click.option("--output-dir", "output_dir", type=click.Path(file_okay=False), metavar="DIR",
              help="Write the files into DIR (created if missing). Without it, the files go to stdout "
                   "in the format -o gives.")
@options.output_option(["yaml", "json"], default="yaml",
                       help_text="Format on stdout: yaml, one multi-document stream of the YAML files; json, "
                                 "{kind, files: [{name, content, executable}]} with every file, scripts included.")
@click.option("-n", "--namespace", metavar="NAMESPACE",
              help="Namespace of the exported ConfigMap [device-plugin, helm-values: nvidia-device-plugin; "
                   "mig-parted: gpu-operator; hami: kube-system].")
@click.option("--default-config", default="exclusive", show_default=True, metavar="NAME",
              help="The device-plugin config of nodes without a label (config.default).")
def export(inventory, limit, vault, reading, catalog_file, kind, output_dir, output, namespace, default_config):
    """Export the fleet plan for the cluster and for NVIDIA's tools.

    \b
    KIND:
      device-plugin  ConfigMap with one named config per distinct node plan,
                     node label manifests and a kubectl label script
      mig-parted     mig-parted config (one named config per distinct MIG plan,
                     per-GPU entries with PCI device filters), a ConfigMap for the
                     GPU Operator, nvidia.com/mig.config label manifests and script
      helm-values    values for node-feature-discovery 0.19.0 and
                     nvidia-device-plugin 0.20.0, and a helm install script
      hami           HAMi 2.10.0: ConfigMap with one nodeconfig entry per HAMi
                     node, gpu=on label manifests, chart values, install script
      dra            the ResourceSlices NVIDIA's DRA driver (gpu.nvidia.com
                     v0.4.0) publishes for each planned node, and the
                     DeviceClasses they belong to (resource.k8s.io/v1)

    Exit status: 0 on success; 2 on bad input (every problem listed); 1 when the files
    cannot be written.
    """
    from ansible_collections.gpuprov.gpu.plugins.plugin_utils.cluster_render_error import ClusterRenderError

    fleet = load_plans(inventory, limit, vault, catalog_file=catalog_file, reading=reading)
    configs = dict(fleet.result["device_plugin_configs"])
    if limit and kind not in ("mig-parted", "dra"):
        # The ConfigMap is cluster-wide: an export for some hosts keeps the configs of every
        # inventory node (labels are written for the selected hosts only).
        configs = dict(load_plans(inventory, None, vault, catalog_file=catalog_file,
                                  reading=reading).result["device_plugin_configs"],
                       **configs)
    try:
        if kind == "device-plugin":
            files = _device_plugin_files(fleet, configs, namespace, default_config)
        elif kind == "mig-parted":
            files = _mig_parted_files(fleet, namespace)
        elif kind == "hami":
            files = _hami_files(fleet, namespace)
        elif kind == "dra":
            files = _dra_files(fleet, catalog_file)
        else:
            files = _helm_values_files(fleet, configs, namespace, default_config)
    except ClusterRenderError as exc:
        fail_bad_input(exc.problems, header="gpuprov: %d problem(s); nothing was exported:" % len(exc.problems))

    if output_dir is None and output == "json":
        render.echo(render.to_json({"kind": kind, "files": [
            {"name": f.name, "content": f.text, "executable": f.executable} for f in files]}, depth=1))
        return
    if output_dir is None:
        render.echo("---\n".join("# gpuprov export %s: %s\n%s" % (kind, f.name, f.text) for f in files if f.stdout),
                    nl=False)
        return
    try:
        os.makedirs(output_dir, exist_ok=True)
        for export_file in files:
            changed = write_atomically(output_dir, export_file)
            render.echo("%s %s" % ("wrote    " if changed else "unchanged", os.path.join(output_dir, export_file.name)))
    except OSError as exc:
        render.echo("gpuprov: cannot write %s: %s; check the folder and its permissions"
                   % (exc.filename or output_dir, exc.strerror or exc), err=True)
        raise SystemExit(EXIT_FAILED)
