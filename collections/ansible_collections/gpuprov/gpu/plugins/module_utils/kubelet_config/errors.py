# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""The one error type of kubelet config handling."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class KubeletConfigError(Exception):
    """Bad input or a config the kubelet would reject. ``errors`` lists one line per field."""

    def __init__(self, message, errors=None):
        super(KubeletConfigError, self).__init__(message)
        self.errors = list(errors or [])
