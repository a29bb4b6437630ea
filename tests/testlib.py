"""Paths shared by the tests (a plain module: several conftest.py files exist, so tests
must not import `conftest` by name)."""
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The fakes: the files of the test-kit role gpuprov.gpu.fake_gpu_node, their only home (see its
# README.md). The collection's unit tests get the same folder from GPUPROV_FAKES_DIR, which the
# root conftest.py sets.
FAKES = os.path.join(REPO, "collections", "ansible_collections", "gpuprov", "gpu", "roles", "fake_gpu_node", "files")
SHARED_REFERENCE = os.path.join(os.path.dirname(REPO), "shared", "reference", "real-world")
