"""The origin the secured-cluster jobs fetch from: the end-to-end tests' own."""

from tests.e2e.conftest import origin  # noqa: F401 - a fixture, shared
