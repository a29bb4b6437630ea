# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What every filter that renders cluster objects from a fleet plan does around its renderer:
the input checked to be the plan's nodes mapping, every argument turned into plain data (Ansible
hands filters tagged str/dict subclasses; ``plain_data``, which the other filters use too), and
the renderer's problems raised as one AnsibleFilterError that names the filter."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import hami_cluster
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.cluster_render_error import ClusterRenderError


def plain_data(value):
    """``value`` as plain dict/list/str/int/bool/None.

    Ansible hands filters subclasses of str and dict that carry its own tags; PyYAML's safe
    dumper represents only the exact built-in types, and a JSON round trip gives those.
    """
    return json.loads(json.dumps(value))


def render_plan(filter_name, render, nodes, *args, **kwargs):
    """``render(nodes, *args, **kwargs)`` for filter ``filter_name``."""
    if not isinstance(nodes, dict):
        raise AnsibleFilterError("%s: the input must be the plan's nodes mapping" % filter_name)
    nodes, args, kwargs = plain_data([nodes, list(args), kwargs])
    try:
        return render(nodes, *args, **kwargs)
    except (ClusterRenderError, hami_cluster.HamiRenderError) as exc:
        raise AnsibleFilterError("%s: %s" % (filter_name, "; ".join(exc.problems)))
    except (KeyError, TypeError, AttributeError) as exc:
        raise AnsibleFilterError("%s: the input is not a gpuprov node plan mapping (%s)" % (filter_name, exc))
