"""gpuprov: plan and converge GPU sharing across a Kubernetes fleet."""

__version__ = "0.1.0"
