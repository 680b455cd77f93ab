"""The origin the secured-cluster jobs fetch from (the end-to-end tests' own), and the outside clients."""

from tests.clients import java_client, node_client  # noqa: F401 - fixtures, shared
from tests.e2e.conftest import origin  # noqa: F401 - a fixture, shared
