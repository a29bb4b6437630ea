# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The lookups an offline read of an inventory may use, and what each may read.

An inventory may come from a repository its reader does not trust (a pull request planned in
CI), so a lookup must neither run anything nor read what belongs to the machine:

* only ``file``, ``env`` and ``vars`` are allowed; any other lookup is refused before its
  plugin is loaded (``pipe``, ``lines``, ``url``, ``password`` ... run programs, reach the
  network or write files), and an allowed short name must resolve to Ansible's builtin;
* the builtin filters and tests that read the machine (``expandvars``, ``expanduser``,
  ``realpath``, ``relpath``, the file tests ``exists``, ``file``, ...) are refused too, and
  Jinja's ``include``, ``import`` and ``extends`` read files by the ``file`` rule;
* ``file`` reads only regular files inside the inventory's own folders (the folders of the
  ``-i`` sources), links resolved, no hidden file or folder on the way (``.git/config`` holds
  a CI checkout's credentials), at most ``safe_files.MAX_BYTES``;
* ``env`` reads only variables whose names start with ``ENV_PREFIX`` and the ones the user
  names (``--allow-env``);
* what a lookup returned is remembered, so a message about the variable can leave it out.

Every lookup()/query() in a template is resolved through ``lookup_loader.get`` (ansible-core
2.19 to 2.21, ``_internal/_templating/_jinja_plugins.py`` ``_invoke_lookup``), which is where
the guard answers. A refusal is also recorded, so a template that swallows the error
(``errors='ignore'``) is refused all the same.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import os

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import safe_files

ALLOWED_LOOKUPS = ("file", "env", "vars")
ENV_PREFIX = "GPUPROV_"
_BUILTIN = "ansible.builtin."
# ansible-core's filters and tests that read the machine rather than their argument
# (plugins/filter/core.py, plugins/test/files.py): expandvars reads any environment variable,
# expanduser the user database, realpath and relpath the file system and the working folder,
# the file tests whether a path exists. An offline read refuses them as it refuses lookups.
REFUSED_FILTERS = {
    "expandvars": "it reads the environment of the machine that plans",
    "expanduser": "it reads the home folders of the machine that plans",
    "realpath": "it reads the file system of the machine that plans",
    "relpath": "it reads the working folder of the machine that plans",
}
REFUSED_TESTS = dict((name, "it probes the file system of the machine that plans") for name in (
    "directory", "is_dir", "file", "is_file", "link", "is_link", "exists", "link_exists",
    "same_file", "is_same_file", "mount", "is_mount"))


class RefusedLookup(Exception):
    def __init__(self, name, reason=None):
        self.name = name
        super(RefusedLookup, self).__init__(reason or (
            "lookup %r is not allowed while planning (it may run a program, reach the network or write a file); "
            "plans may use only the %s lookups" % (name, ", ".join(ALLOWED_LOOKUPS))))


def _short(name):
    name = str(name)
    for prefix in (_BUILTIN, "ansible.legacy."):
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def lookup_allowed(name):
    """True for an allowed lookup, by short name or as ansible.builtin.NAME/ansible.legacy.NAME."""
    return _short(name) in ALLOWED_LOOKUPS


class LookupPolicy:
    """What the allowed lookups may read: files under ``roots``, variables ``env_names`` and
    those starting with ENV_PREFIX. ``roots`` empty: no file at all."""

    def __init__(self, roots=(), env_names=()):
        self.roots = tuple(os.path.realpath(str(root)) for root in roots)
        self.env_names = frozenset(str(name) for name in env_names or ())

    @classmethod
    def for_sources(cls, sources, env_names=()):
        """The folders of inventory sources (a folder itself, a file's folder; a host list
        ``a,b`` has none)."""
        roots = []
        for source in sources:
            source = str(source)
            if "," in source and not os.path.exists(source):
                continue
            roots.append(source if os.path.isdir(source) else os.path.dirname(os.path.abspath(source)))
        return cls(roots, env_names)

    def env_allowed(self, name):
        return name.startswith(ENV_PREFIX) or name in self.env_names

    def file_problem(self, path):
        """Why ``path`` may not be read, or None."""
        return safe_files.confined_problem(path, self.roots)


class LookupRecord:
    """What the lookups of the variable being rendered did: values returned, refusals."""

    __slots__ = ("values", "refused")

    def __init__(self):
        self.values = []
        self.refused = None


@contextlib.contextmanager
def offline_lookups(policy=None, record=None):
    """Refuse every lookup but ALLOWED_LOOKUPS, and the filters and tests that read the
    machine, while the block runs; hold ``file`` and ``env`` to ``policy`` (a LookupPolicy;
    None: no file, only ENV_PREFIX variables).

    ``record``: a callable returning the LookupRecord of the variable being rendered (or
    None), where looked-up values and refusals are noted.
    """
    from ansible.plugins.loader import lookup_loader

    policy = policy if policy is not None else LookupPolicy()
    original = lookup_loader.get

    def refuse(exc):
        current = record() if record is not None else None
        if current is not None and current.refused is None:
            current.refused = exc
        raise exc

    def guarded(name, *args, **kwargs):
        if not lookup_allowed(name):
            refuse(RefusedLookup(name))
        plugin = original(name, *args, **kwargs)
        resolved = getattr(plugin, "ansible_name", None) if plugin is not None else None
        if resolved is not None and not str(resolved).startswith(_BUILTIN):
            refuse(RefusedLookup(resolved))
        if plugin is not None:
            _confine(plugin, str(resolved or name).rsplit(".", 1)[-1], policy, refuse, record)
        return plugin

    def machine_readers(loader, kind, refused):
        """``loader.get`` refusing ansible-core's ``refused`` plugins, asked by any name."""
        original_get = loader.get

        def checked(name, *args, **kwargs):
            plugin = original_get(name, *args, **kwargs)
            resolved = getattr(plugin, "ansible_name", None) if plugin is not None else None
            for candidate in (str(name), str(resolved or "")):
                builtin = candidate.startswith((_BUILTIN, "ansible.legacy.")) or "." not in candidate
                if builtin and _short(candidate) in refused:
                    refuse(RefusedLookup(str(name), "%s %r is not allowed while planning (%s)"
                                         % (kind, str(name), refused[_short(candidate)])))
            return plugin

        return checked

    from ansible.plugins.loader import filter_loader, test_loader
    from jinja2 import loaders as jinja_loaders

    # {% include %}, {% import %} and {% extends %} read a file through the Jinja environment's
    # loader, a FileSystemLoader on Ansible's basedir (ansible-core _internal/_templating/
    # _jinja_bits.py, 2.19 to 2.21), i.e. the working folder: held to the policy's folders too.
    original_source = jinja_loaders.FileSystemLoader.get_source

    def confined_source(loader, environment, template):
        pieces = jinja_loaders.split_template_path(template)
        for searchpath in loader.searchpath:
            # The file Jinja's FileSystemLoader.get_source (3.1) is about to open.
            candidate = os.path.join(searchpath, *pieces)
            if os.path.isfile(candidate):
                problem = policy.file_problem(candidate)
                if problem is not None:
                    refuse(RefusedLookup("include", "template %r (include, import or extends): %s"
                                         % (str(template)[:200], problem)))
                break
        return original_source(loader, environment, template)

    filter_loader.get = machine_readers(filter_loader, "filter", REFUSED_FILTERS)
    test_loader.get = machine_readers(test_loader, "test", REFUSED_TESTS)
    jinja_loaders.FileSystemLoader.get_source = confined_source
    lookup_loader.get = guarded
    try:
        yield
    finally:
        del lookup_loader.get
        del filter_loader.get
        del test_loader.get
        jinja_loaders.FileSystemLoader.get_source = original_source


def _confine(plugin, short_name, policy, refuse, record):
    """Hold one lookup instance to the policy: its search-path answer (file) or its terms
    (env) are checked before it reads, and what it returns is recorded."""
    run = plugin.run

    if short_name == "file":
        find = plugin.find_file_in_search_path

        def checked_find(variables, subdir, needle, ignore_missing=False):
            found = find(variables, subdir, needle, ignore_missing=ignore_missing)
            problem = policy.file_problem(found) if found else None
            if problem is not None:
                refuse(RefusedLookup("file", "lookup 'file' of %r: %s" % (str(needle)[:200], problem)))
            return found

        plugin.find_file_in_search_path = checked_find

    def checked_run(terms, variables=None, **kwargs):
        if short_name == "env":
            for term in terms:
                name = str(term).split()[0] if str(term).split() else ""
                if not policy.env_allowed(name):
                    refuse(RefusedLookup("env", "lookup 'env' of %r is not allowed while planning: only "
                                                "variables named %s* or given with --allow-env NAME"
                                         % (name[:100], ENV_PREFIX)))
        result = run(terms, variables=variables, **kwargs)
        current = record() if record is not None else None
        if current is not None and short_name in ("file", "env"):
            values = result if isinstance(result, (list, tuple)) else [result]
            for term, value in zip(terms, values):
                if isinstance(value, str) and value:
                    term = str(term)
                    current.values.append((short_name, term.split()[0] if short_name == "env" and term.split()
                                           else term, value))
        return result

    plugin.run = checked_run
