"""The names table of docs/api.md ("The names in each language") against the public names of
``Redlock``, ``Request``, ``Lock``, ``Election`` and ``Leadership``, found by ``inspect``: a public
name in no row, or a name in the Python column that is not public, fails."""

from __future__ import annotations

import inspect
from pathlib import Path

import redquorum

API = Path(__file__).resolve().parents[3] / "docs" / "api.md"
SURFACES = ["Redlock", "Request", "Lock", "Election", "Leadership"]


def table_column(text: str, language: str) -> set[str]:
    """The names in ``language``'s column; every cell holds names or a ``—`` exception with its
    reason."""
    sections = text.split("\n## ")
    section = next(s for s in sections if s.startswith("The names in each language"))
    names: set[str] = set()
    column = None
    for line in (l for l in section.splitlines() if l.startswith("|")):
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        if cells[0] == "concept":
            column = cells.index(language)
            continue
        if cells[0].startswith("---"):
            continue
        assert column is not None, "a header row before the rows"
        for i, cell in enumerate(cells[1:], start=1):
            if cell.startswith("—"):
                assert cell[1:].strip(), f"docs/api.md, row {cells[0]!r}: an exception, no reason"
                continue
            in_cell = cell.split("`")[1::2]
            assert in_cell, f"docs/api.md, row {cells[0]!r}: no names and no exception"
            if i == column:
                names.update(in_cell)
    return names


def public_names() -> set[str]:
    """``Type.name`` for every public attribute of the surface's classes, and for each keyword of
    ``Request(...)``."""
    names = set()
    for surface in SURFACES:
        cls = getattr(redquorum, surface)
        names.update(f"{surface}.{n}" for n, _ in inspect.getmembers(cls) if not n.startswith("_"))
    params = inspect.signature(redquorum.Request.__init__).parameters
    names.update(f"Request.{n}" for n in params if n != "self")
    return names


def test_every_public_python_name_has_a_row_in_the_names_table() -> None:
    public = public_names()
    assert "Redlock.acquire" in public
    table = table_column(API.read_text(encoding="utf-8"), "Python")
    missing = sorted(public - table)
    stale = sorted(table - public)
    assert not missing and not stale, (
        f'docs/api.md, "The names in each language", column Python: public names in no row (add '
        f"a row, or the name to its concept's row, with the other languages' counterparts or a "
        f"`—` exception): {missing}; names in the table that are not public: {stale}"
    )
