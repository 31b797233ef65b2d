"""Every table profkit shows, declared once: name, title, what it needs, how it is built, its columns.

`profkit show -t NAME`, its `-t` help, the HTML report's sections, the Python API (`Profile.table(name)`) and the
column glossary (docs/columns.md) all iterate TABLES. A new table is one `register(...)` call and one builder:
a function of a Bundle (analyse.bundle: the stored tables of a session or of raw reports) to a DataFrame.

needs: requirements on the input's kinds (Bundle.kinds), all of which must hold; "a|b" means either.
default: "ncu" shows the table by default for inputs with profiled launches, "nsys" for timeline-only inputs,
"guided" for guided captures of a program; "a|b" for either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Collection

import pandas as pd

from profkit.errors import ReportError, UsageError

if TYPE_CHECKING:  # the registry is imported before the bundle module (which imports pandas' readers)
    from profkit.analyse.bundle import Bundle

Builder = Callable[["Bundle"], pd.DataFrame]
"""A table's builder: the stored tables of one input (a Bundle) to the table as `profkit show` prints it."""

KIND_MEANING = {
    "ncu": "profiled kernel launches (an ncu report)",
    "nsys": "an nsys timeline",
    "timings": "cudaEvent timings printed by the program",
    "pc": "per-instruction PC sampling (ncu --set full)",
    "source": "per-source-line counters (ncu --set full with line info)",
    "rules": "ncu rule results",
    "build": "a build by profkit (ptxas resources)",
    "nvtx": "NVTX ranges in an nsys timeline",
    "copies": "memcpy/memset records in an nsys timeline",
    "api": "CUDA API calls in an nsys timeline",
    "notes": "capture notes",
    "guided": "a guided capture (profile of a foreign program)",
}


@dataclass(frozen=True)
class TableSpec:
    """One table's declaration: what it needs of an input, how it is built and the columns it has."""

    name: str
    title: str
    description: str
    needs: tuple[str, ...]
    build: Builder
    columns: tuple[str, ...]
    default: str | None = None
    hint: str = ""  # what to use instead when it does not apply
    live: bool = False  # built from files outside the input as they are now: never cached (cli.show_cache)

    def missing(self, kinds: Collection[str]) -> list[str]:
        """The requirements `kinds` does not meet (empty: the table applies)."""
        return [need for need in self.needs if not any(part in kinds for part in need.split("|"))]

    def why_not(self, kinds: Collection[str]) -> str:
        """Why the table does not apply to an input with these kinds ('' when it does)."""
        missing = self.missing(kinds)
        if not missing:
            return ""
        wanted = "; ".join(" or ".join(KIND_MEANING.get(p, p) for p in need.split("|")) for need in missing)
        return f"table {self.name!r} needs {wanted}" + (f" ({self.hint})" if self.hint else "")


TABLES: dict[str, TableSpec] = {}


def register(name: str, title: str, description: str, needs: tuple[str, ...], columns: tuple[str, ...],
             default: str | None = None, hint: str = "", live: bool = False) -> Callable[[Builder], Builder]:
    """Decorator: declare a table whose builder is the decorated function (Bundle -> DataFrame)."""
    def wrap(build: Builder) -> Builder:
        if name in TABLES:
            raise ValueError(f"table {name!r} declared twice")
        TABLES[name] = TableSpec(name, title, description, tuple(needs), build, tuple(columns), default, hint,
                                live)
        return build
    return wrap


def spec(name: str) -> TableSpec:
    """The declaration of one table; a UsageError listing the names when there is no such table."""
    _load_declarations()
    if name not in TABLES:
        raise UsageError(f"unknown table {name!r}", hint=f"choose from {', '.join(TABLES)}")
    return TABLES[name]


def all_specs() -> list[TableSpec]:
    """Every table's declaration, in declaration order (the order `profkit show --all` prints them)."""
    _load_declarations()
    return list(TABLES.values())


def applicable(bundle: Bundle) -> list[str]:
    """Names of the tables that apply to one input, in declaration order."""
    kinds = bundle.kinds
    return [s.name for s in all_specs() if not s.missing(kinds)]


def defaults(bundle: Bundle) -> list[str]:
    """The tables `profkit show` prints without -t: the "ncu" defaults for inputs with profiled launches, else the
    "nsys" ones; and the "guided" ones for a guided capture."""
    kinds = bundle.kinds
    wanted = {"ncu" if "ncu" in kinds else "nsys"} | ({"guided"} & kinds)
    return [s.name for s in all_specs() if wanted & set((s.default or "").split("|")) and not s.missing(kinds)]


def build(bundle: Bundle, name: str) -> pd.DataFrame:
    """One table of one input; a UsageError (exit 2) saying why when it does not apply."""
    table = spec(name)
    why = table.why_not(bundle.kinds)
    if why:
        raise UsageError(f"{bundle.name}: {why}")
    try:
        return table.build(bundle)
    except (KeyError, TypeError, ValueError) as exc:  # a stored table whose columns or values were damaged on disk
        raise ReportError(f"{bundle.name}: table {name!r} cannot be built from the stored tables "
                          f"({type(exc).__name__}: {exc})",
                          hint=f"re-derive them from the reports: profkit show --rebuild {bundle.path}") from exc


def _load_declarations() -> None:
    """The declarations live in analyse.views; imported on first use so importing the registry stays cheap."""
    from profkit.analyse import views  # noqa: F401 - registers the tables
