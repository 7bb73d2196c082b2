"""Definitions of imported names: imports read from any document, resolved inside the
workspace, outlined, and refreshed when the file on disk changes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lsp_server.project.python_definitions import (
    DefinitionIndex,
    Import,
    imports_of,
    outline_module,
    signatures_of,
    used_names,
)
from lsp_server.project.workspace import Workspace

GEOMETRY = '''"""Shapes."""

RATIO = 2


def scale(value, factor=RATIO):
    """Multiply."""
    return value * factor


def area(width, height):
    """The area of a rectangle.

    Longer explanation that the outline leaves out.
    """
    w = scale(width)
    h = scale(height)
    a = w * h
    b = a + 0
    c = b + 0
    d = c + 0
    e = d + 0
    return e


class Box:
    """A box."""

    kind = "box"

    def __init__(self, width, height):
        self.width = width
        self.height = height

    def volume(self, depth):
        return self.width * self.height * depth

    def _secret(self):
        return 1

    def grow(self, by):
        self.width += by
        self.height += by
        return self

    def shrink(self, by):
        self.width -= by
        return self
'''


def test_imports_are_read_even_when_the_document_does_not_parse():
    text = ("import os, json as j\nfrom .geometry import (scale,\n    area as surface)\n"
            "from pkg.sub import thing\nimport pkg.helpers\n"
            'def f(:\n    """from the docs import nothing"""\n')
    assert imports_of(text) == (
        Import("os", 0, None, "os"), Import("json", 0, None, "j"),
        Import("geometry", 1, "scale", "scale"), Import("geometry", 1, "area", "surface"),
        Import("pkg.sub", 0, "thing", "thing"), Import("pkg", 0, None, "pkg"))


def test_used_names_leave_out_the_import_lines():
    names, attrs = used_names("import os\nfrom m import a, b\nx = a(os.path.join)\n")
    assert "a" in names and "b" not in names and attrs["os"] == {"path"}


def test_outlines_keep_signatures_and_first_docstring_paragraph():
    outline = outline_module(GEOMETRY)
    assert outline is not None
    scale_text = outline.definitions["scale"][1]
    assert scale_text.startswith("def scale(value, factor=RATIO):") and "return" in scale_text
    area = outline.definitions["area"][1]
    assert area.startswith("def area(width, height):") and "The area of a rectangle." in area
    assert "Longer explanation" not in area and "return e" not in area
    box = outline.definitions["Box"][1]
    assert "def volume(self, depth): ..." in box and "_secret" not in box
    assert 'kind = "box"' in box
    assert outline.definitions["RATIO"][1] == "RATIO = 2"
    sigs = signatures_of(GEOMETRY)
    assert sigs is not None and "def area(width, height): ..." in sigs
    assert "class Box:" in sigs and "Longer" not in sigs
    assert outline_module("def broken(:\n") is None


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "shapes").mkdir(parents=True)
    (root / "shapes" / "__init__.py").write_text("from .geometry import Box\n")
    (root / "shapes" / "geometry.py").write_text(GEOMETRY)
    (root / "shapes" / "units.py").write_text("def to_cm(inches):\n    return inches * 2.54\n")
    return root


def index_of(*folders: Path) -> DefinitionIndex:
    ws = Workspace()
    for f in folders:
        ws.add(f.as_uri())
    return DefinitionIndex(ws, refresh_s=0.0)


def names(defs) -> list[str]:
    return [d.name for d in defs]


def test_from_import_finds_the_definition(project):
    doc = project / "main.py"
    text = "from shapes.geometry import scale, area\n\nprint(scale(2), area(1, 2))\n"
    found = index_of(project).definitions(doc, text)
    assert names(found) == ["scale", "area"]
    assert found[0].path.name == "geometry.py" and "def scale" in found[0].text


def test_import_module_finds_the_attributes_used(project):
    doc = project / "main.py"
    text = "import shapes.units as u\nimport shapes.geometry\n\nu.to_cm(3)\n"
    assert names(index_of(project).definitions(doc, text)) == ["to_cm"]


def test_relative_imports_submodules_and_reexports(project):
    doc = project / "shapes" / "cli.py"
    text = ("from . import units\nfrom .geometry import area\nfrom shapes import Box\n\n"
            "units.to_cm(area(1, 2)); Box(1, 2)\n")
    found = index_of(project).definitions(doc, text)
    assert names(found) == ["to_cm", "area", "Box"]
    assert found[2].path.name == "geometry.py"  # followed through shapes/__init__.py


def test_unused_and_unknown_imports_bring_nothing(project):
    text = "from shapes.geometry import scale\nimport json\nfrom nowhere import x\n\nx()\n"
    assert index_of(project).definitions(project / "main.py", text) == []


def test_a_folder_that_is_itself_the_package_resolves_its_absolute_imports(project):
    doc = project / "shapes" / "cli.py"
    text = "from shapes.geometry import scale\n\nscale(1)\n"
    assert names(index_of(project / "shapes").definitions(doc, text)) == ["scale"]


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symbolic links here")
def test_modules_outside_the_workspace_are_never_read(project, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "leak.py").write_text("def secret():\n    return 'do not read'\n")
    (project / "leak.py").symlink_to(outside / "leak.py")
    (project / "shapes" / "ext").symlink_to(outside, target_is_directory=True)
    text = ("from leak import secret\nfrom shapes.ext.leak import secret as s2\n"
            "from ..outside.leak import secret as s3\n\nsecret(); s2(); s3()\n")
    assert index_of(project).definitions(project / "shapes" / "main.py", text) == []


def test_a_changed_file_is_parsed_again(project):
    doc = project / "main.py"
    text = "from shapes.units import to_cm\n\nto_cm(1)\n"
    index = index_of(project)
    assert "2.54" in index.definitions(doc, text)[0].text
    units = project / "shapes" / "units.py"
    units.write_text("def to_cm(inches, exact=True):\n    return inches * 2.540\n")
    st = units.stat()
    os.utime(units, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # a later mtime for sure
    assert "exact=True" in index.definitions(doc, text)[0].text


def test_a_generated_block_of_imports_is_read_up_to_its_bound():
    from lsp_server.project.python_imports import MAX_IMPORT_STATEMENTS
    text = ("import os\n" * (MAX_IMPORT_STATEMENTS + 100) + "import json\n"
            + "x = json.loads(s)\n")
    assert imports_of(text) == (Import("os", 0, None, "os"),)  # the first statements only
    names, attrs = used_names(text)
    # Beyond the statements read, import lines are still not code; the code is.
    assert "json" in names and attrs["json"] == frozenset({"loads"}) and "os" not in names


def test_a_half_typed_import_does_not_swallow_the_imports_below():
    text = "from a import (\nimport os\nfrom b import (c,\n    d)\nos.path\n"
    assert [i.alias for i in imports_of(text)] == ["os", "c", "d"]


def test_a_scanner_that_reuses_the_statements_read_answers_as_a_fresh_one():
    from lsp_server.project.python_imports import MAX_IMPORT_STATEMENTS, ImportScanner
    n = MAX_IMPORT_STATEMENTS
    block = "".join(f"from m{i} import (a{i},\n    b{i})\n" for i in range(n - 1))
    base = block + "from last import (\nimport os\nimport sys\nx = os.path + sys.argv\n"
    edits = [base,
             base + "y = json.dumps(x)\n",  # typed below the statements read
             base.replace("import os\n", "    c)\n"),  # the next import line is gone
             base.replace("from m3 import", "from n3 import"),  # inside the statements read
             base + "z = os.sep\n"]
    kept = ImportScanner()
    for text in edits:
        assert kept.scan(text) == ImportScanner().scan(text)
        assert kept.scan(text).imports == imports_of(text)
        assert (kept.scan(text).names, kept.scan(text).attrs) == used_names(text)
