"""pytest setup for the SSH test fleet tests."""


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "fleet: starts simulated GPU nodes (sshd in mount namespaces); needs root and openssh-server",
    )
