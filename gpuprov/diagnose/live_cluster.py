"""The live cluster as `kubectl get -o json` prints it: nodes, pods, FailedScheduling events
and DRA objects, read with the kubernetes Python client (`gpuprov diagnose`, `gpuprov pool`)."""
import os

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import safe_files


class ClusterError(Exception):
    """The live cluster could not be read (not bad input: the command may work on retry)."""


class KubeconfigError(ValueError):
    """A kubeconfig that is missing, unreadable or malformed: bad input (exit 2)."""


def check_kubeconfig(path=None):
    """Read the kubeconfig with the bounds of every input file and check its shape, so a
    malformed one is exit 2 naming the file, not a traceback from the client."""
    if path is None:
        env = os.environ.get("KUBECONFIG", "")
        path = env.split(os.pathsep)[0] if env else os.path.expanduser("~/.kube/config")
    if not os.path.exists(path):
        raise KubeconfigError("kubeconfig %s: no such file" % path)
    try:
        data = safe_files.load(path, kind="yaml")
    except safe_files.FileInputError as error:
        raise KubeconfigError("kubeconfig %s" % error) from None
    if not isinstance(data, dict):
        raise KubeconfigError("kubeconfig %s: expected a mapping (apiVersion: v1, kind: Config)" % path)
    for key in ("clusters", "contexts", "users"):
        value = data.get(key)
        if value is not None and (not isinstance(value, list) or not all(
                isinstance(item, dict) and isinstance(item.get("name"), str) for item in value)):
            raise KubeconfigError("kubeconfig %s: %s: expected a list of {name, ...}" % (path, key))
    return data


def _api_client(kubeconfig, context):
    try:
        from kubernetes import config
        from kubernetes.config import ConfigException
    except ImportError:
        raise ClusterError("the kubernetes Python client is not installed; install it with "
                           "`pip install 'gpuprov[cluster]'`, or export a snapshot with kubectl and use "
                           "--snapshot DIR") from None
    check_kubeconfig(kubeconfig)
    try:
        return config.new_client_from_config(config_file=kubeconfig, context=context)
    except (ConfigException, OSError, TypeError, ValueError, AttributeError, KeyError) as error:
        # The client raises these for a kubeconfig whose fields have the wrong shape.
        raise KubeconfigError("kubeconfig %s%s: %s" % (kubeconfig or "(default: $KUBECONFIG or ~/.kube/config)",
                                                    " context %s" % context if context else "", error)) from None


def fetch_dra(kubeconfig=None, context=None):
    """(ResourceSliceList, ResourceClaimList, notes) as kubectl prints them, or (None, None, notes)
    when the cluster does not serve resource.k8s.io/v1 (no DRA, or Kubernetes before 1.34)."""
    api_client = _api_client(kubeconfig, context)
    from kubernetes import client

    api = client.ResourceV1Api(api_client)
    try:
        documents = (api.list_resource_slice(), api.list_resource_claim_for_all_namespaces())
    except Exception as error:  # ApiException, urllib3 and socket errors
        status = getattr(error, "status", None)
        if status == 404:
            return None, None, ["the cluster serves no resource.k8s.io/v1 (DRA): device-plugin resources only"]
        reason = getattr(error, "reason", None) or str(error).splitlines()[0]
        raise ClusterError("cannot list ResourceSlices and ResourceClaims%s: %s%s; check that your user may list "
                           "them cluster-wide" % (" (context %s)" % context if context else "",
                                                  "HTTP %s " % status if status else "", reason)) from None
    return tuple(api_client.sanitize_for_serialization(doc) for doc in documents) + ([],)


def fetch_cluster(kubeconfig=None, context=None):
    """nodes, pods and FailedScheduling events as `kubectl get -o json` would print them."""
    api_client = _api_client(kubeconfig, context)
    from kubernetes import client

    core = client.CoreV1Api(api_client)
    try:
        documents = (
            core.list_node(),
            core.list_pod_for_all_namespaces(),
            core.list_event_for_all_namespaces(field_selector="reason=FailedScheduling"),
        )
    except Exception as error:  # ApiException, urllib3 and socket errors all mean the same here
        status = getattr(error, "status", None)
        reason = getattr(error, "reason", None) or str(error).splitlines()[0]
        raise ClusterError("cannot list nodes, pods and events%s: %s%s; check the context and that your "
                           "user may list them cluster-wide"
                           % (" (context %s)" % context if context else "",
                              "HTTP %s " % status if status else "", reason)) from None
    return tuple(api_client.sanitize_for_serialization(doc) for doc in documents)


def add_live_dra(snapshot, kubeconfig, context):
    """ResourceSlices and ResourceClaims of the live cluster into the snapshot (where DRA is served)."""
    from gpuprov.diagnose.dra_objects import parse_resource_claims, parse_resource_slices

    slices_doc, claims_doc, notes = fetch_dra(kubeconfig, context)
    snapshot.notes.extend(notes)
    if slices_doc is None:
        return
    devices, slice_notes = parse_resource_slices(slices_doc, "cluster resourceslices")
    snapshot.dra_devices = devices
    snapshot.dra_claims = parse_resource_claims(claims_doc, "cluster resourceclaims")
    snapshot.notes.extend(slice_notes)
