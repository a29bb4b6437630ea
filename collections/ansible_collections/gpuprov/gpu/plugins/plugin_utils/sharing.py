# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The sharing providers gpuprov knows, by strategy.

The planner asks ``provider_for(strategy)`` and never branches on a provider's name; a new
provider (DRA, say) is one more file implementing sharing_base.SharingProvider, listed here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import sharing_device_plugin, sharing_hami

_ALL = (sharing_device_plugin.DevicePluginProvider(), sharing_hami.HamiProvider())
PROVIDERS = dict((strategy, p) for p in _ALL for strategy in p.strategies)


def providers():
    return list(_ALL)


def provider_for(strategy):
    return PROVIDERS[strategy]


def strategies():
    return tuple(PROVIDERS)


def owned_keys():
    """{key: provider} for every gpuprov_sharing key a provider owns."""
    return dict((key, p) for p in _ALL for key in p.keys)
