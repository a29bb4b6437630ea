"""Make the in-repo collection importable as ansible_collections.gpuprov.gpu in tests.

Ansible's own loader finds it through ansible.cfg (collections_path = ./collections);
plain pytest imports need the same folder on sys.path.
"""
import os
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))
COLLECTIONS = os.path.join(ROOT, "collections")
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
