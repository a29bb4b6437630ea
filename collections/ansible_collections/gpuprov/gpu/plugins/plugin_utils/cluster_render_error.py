# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The error every cluster-side renderer raises (device-plugin configs, node labels, Helm
values, the mig-parted export): all problems found, one line each, so a caller lists them
all at once (the filters through plan_filters, ``gpuprov export`` as bad input)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ClusterRenderError(ValueError):
    """The plans cannot be rendered for the cluster; ``problems`` holds one line each."""

    def __init__(self, problems):
        self.problems = list(problems)
        super(ClusterRenderError, self).__init__("; ".join(self.problems))
