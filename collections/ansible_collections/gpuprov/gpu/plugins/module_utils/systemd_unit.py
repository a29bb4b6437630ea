# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""systemd unit names as the modules that call systemctl take them.

Kept apart from the kubelet's launch reading (kubelet_config/launch.py) so that a module that
only names a unit does not load the kubelet config package.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def unit_name(service):
    """``service`` as a systemd unit name ("kubelet" -> "kubelet.service").

    Raises ValueError for an empty name, one with a "/" (a path, not a name) or one starting
    with "-" (systemctl would read it as an option).
    """
    if not service or service.startswith("-") or "/" in service:
        raise ValueError("%r is not a unit name" % (service,))
    return service if "." in service else service + ".service"
