"""Paths shared by the tests (a plain module: several conftest.py files exist, so tests
must not import `conftest` by name)."""
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_REFERENCE = os.path.join(os.path.dirname(REPO), "shared", "reference", "real-world")
