"""gpuprov: plan and converge GPU sharing across a Kubernetes fleet."""
from importlib.metadata import PackageNotFoundError, version

try:
    # The one version number is galaxy.yml's; setup.py gives it to the installed metadata.
    __version__ = version("gpuprov")
except PackageNotFoundError:  # a source checkout that was never installed
    __version__ = "0+unknown"
