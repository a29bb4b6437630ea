"""`gpuprov catalog`: GPU models gpuprov knows, and their MIG profiles."""
import click

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import catalog as catalog_mod
from gpuprov import options, render
from gpuprov.errors import fail_bad_input


def _models_table(data):
    rows = []
    for m in data["models"]:
        mig = "%d profiles" % m["mig_profile_count"] if m["mig_capable"] else "no"
        rows.append([m["model"], "%.0f GiB" % (m["memory_mib"] / 1024.0), m["compute_capability"],
                     m["architecture"], mig, ", ".join(m["pci_device_ids"]), m["nvidia_smi_names"][0]])
    return render.table(["MODEL", "MEMORY", "CC", "ARCH", "MIG", "PCI IDS", "NVIDIA-SMI NAME"], rows)


def _model_table(data):
    lines = ["%s: %s" % (render.escape(data["model"]), render.escape(data["description"])),
             "  memory %.1f GiB, compute capability %s, %s" % (data["memory_mib"] / 1024.0,
                                                                data["compute_capability"], data["architecture"]),
             "  nvidia-smi names: %s" % ", ".join(data["nvidia_smi_names"]),
             "  GFD product label: %s" % data["gfd_product"],
             "  PCI device ids: %s" % ", ".join(data["pci_device_ids"])]
    if not data["mig_capable"]:
        lines.append("  MIG: not supported (share with time-slicing or MPS)")
        return "\n".join(lines)
    mig = data["mig"]
    lines.append("  MIG: %d compute slices, %d memory slices; all-balanced = %s" % (
        mig["compute_slices"], mig["memory_slices"],
        " + ".join("%dx %s" % (c, p) for p, c in mig["balanced"].items())))
    lines.append("")
    rows = []
    for p in mig["profiles"]:
        starts = ",".join(str(pl["start"]) for pl in p["placements"])
        rows.append([p["name"], p["nvml_profile_id"], p["nvml_profile_enum"], p["compute_slices"],
                     p["memory_slices"], "%.2f" % p["memory_gib"], p["max_count"],
                     "{%s}:%d" % (starts, p["placements"][0]["size"])])
    lines.append(render.table(["PROFILE", "ID", "ENUM", "COMPUTE", "MEM SLICES", "GiB", "MAX", "PLACEMENTS start:size"],
                              rows))
    return "\n".join(lines)


@click.command()
@click.argument("model", required=False)
@options.output_option(["table", "json", "yaml"])
@options.catalog_option
@options.trust_ansible_cfg_option
def catalog(model, output, catalog_file):
    """List GPU models, or show one MODEL's MIG profiles and placements.

    MODEL may be the catalog name (A100-80GB), the name nvidia-smi prints
    ("NVIDIA A100-SXM4-80GB"), GFD's product label (NVIDIA-A100-SXM4-80GB) or a PCI device id
    (0x20B2, or mig-parted's 0x20B210DE). Placements are in memory slices, as NVML counts
    them: {0,4}:4 means the profile may start at slice 0 or 4 and covers 4 slices.
    """
    models_catalog = catalog_mod
    if catalog_file is not None:
        from ansible_collections.gpuprov.gpu.plugins.plugin_utils import user_catalog

        try:
            models_catalog = user_catalog.UserCatalog(user_catalog.load_file(catalog_file))
        except user_catalog.CatalogFileError as exc:
            fail_bad_input(exc.problems)
    if model is None:
        models = []
        for m in models_catalog.all_models():
            d = m.as_dict()
            d["mig_profile_count"] = len(m.mig.profiles) if m.mig else 0
            models.append(d)
        render.emit({"models": models}, output, _models_table)
        return
    try:
        found = models_catalog.lookup(model)
    except catalog_mod.UnknownModelError as exc:
        fail_bad_input([str(exc)])
    render.emit(found.as_dict(with_profiles=True), output, _model_table)
