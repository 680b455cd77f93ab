"""docs/ARCHITECTURE.md's map of the code names every module under `streams/`, and nothing that is gone."""

import re
from pathlib import Path

ROOT = Path(__file__).parent.parent.parent


def test_the_architecture_maps_every_module_of_streams():
    mapped = set(re.findall(r"`(streams/[\w/]+\.py)`", (ROOT / "docs" / "ARCHITECTURE.md").read_text()))
    modules = {
        str(path.relative_to(ROOT)) for path in (ROOT / "streams").rglob("*.py") if path.name != "__init__.py"
    }
    assert sorted(modules - mapped) == []  # every module is in the map
    assert sorted(path for path in mapped if not (ROOT / path).exists()) == []  # every path named exists
