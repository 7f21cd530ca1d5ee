"""The pack's provenance: where an exception was raised -> a category, as data.

The pack's ``provenance:`` section (``rules/95-provenance.yaml``, written by
``scripts/gen_provenance.py`` from the catalogue of raise sites) maps the innermost frame
of vLLM, transformers, huggingface_hub, torch or a model repository's own code
(transformers_modules: remote_code) that a traceback shows (its file and
function), or the file vLLM's log prefix names, to the category its catalogued raise
sites carry; an exception class of those projects to the category of its raise sites;
and names the exception types that are deterministic when vLLM's own code raises them
while the engine is built (a restart on the same settings fails the same way).

A pack read back from the cache of validated packs defers its section to the first use
of a field (:meth:`Provenance.deferred`): ~3,400 entries, which a run whose verdict a
specific rule names never reads.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from types import MappingProxyType

from diagnostics.model import Category

# A model repository's own code, which transformers loads from the hub into its
# dynamic-modules cache (``~/.cache/huggingface/modules/transformers_modules/<org>/<repo>/
# <revision>/modeling_x.py``) when trust_remote_code allows it.
REPOSITORY_CODE = "transformers_modules"
PROJECTS = ("vllm", "transformers", "huggingface_hub", "torch", REPOSITORY_CODE)
# The section's fields as the pack writes them; the basenames are derived from modules.
_SECTION = ("deterministic", "deterministic_in", "exceptions", "functions", "modules", "packages")
_PROVENANCE_KEYS = {"note", *_SECTION}
_EMPTY: Mapping[str, Category] = MappingProxyType({})
_PROJECT_PATH = re.compile(r"(?:^|[/\\])((?:" + "|".join(PROJECTS) + r")[/\\][^\s\"']+\.py)$")


_FIELDS = (*_SECTION, "basenames")


class Provenance:
    """The provenance section of a pack (empty when the pack has none)."""

    __slots__ = ("_parse", *_FIELDS)
    _parse: Callable[[], Provenance]  # set only on a deferred one
    deterministic: frozenset[str]
    deterministic_in: frozenset[str]
    exceptions: Mapping[str, Category]
    functions: Mapping[str, Category]
    modules: Mapping[str, Category]
    packages: Mapping[str, Category]
    basenames: Mapping[str, Category]

    def __init__(
        self,
        deterministic: frozenset[str] = frozenset(),
        deterministic_in: frozenset[str] = frozenset(),
        exceptions: Mapping[str, Category] = _EMPTY,
        functions: Mapping[str, Category] = _EMPTY,
        modules: Mapping[str, Category] = _EMPTY,
        packages: Mapping[str, Category] = _EMPTY,
        basenames: Mapping[str, Category] = _EMPTY,
    ) -> None:
        self.deterministic, self.deterministic_in = deterministic, deterministic_in
        self.exceptions, self.functions = exceptions, functions
        self.modules, self.packages, self.basenames = modules, packages, basenames

    @classmethod
    def deferred(cls, parse: Callable[[], Provenance]) -> Provenance:
        """The provenance ``parse()`` returns, called on the first use of a field."""
        provenance = cls.__new__(cls)
        provenance._parse = parse
        return provenance

    def __getattr__(self, name: str) -> object:  # only while a slot is unset: deferred
        if name not in _FIELDS:
            raise AttributeError(name)
        parsed = object.__getattribute__(self, "_parse")()
        for field in _FIELDS:
            setattr(self, field, getattr(parsed, field))
        return getattr(self, name)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Provenance):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in _FIELDS)

    def __repr__(self) -> str:
        return "Provenance(" + ", ".join(f"{f}={getattr(self, f)!r}" for f in _FIELDS) + ")"

    def of_frame(self, path: str, function: str, *, exact: bool = False) -> Category | None:
        """The category of a raise in ``function`` of ``path`` (a project-relative path:
        ``vllm/worker/worker.py``): the function's, else (unless ``exact``) the module's,
        else the nearest package's."""
        found = self.functions.get(f"{path}:{function}")
        if found is not None or exact:
            return found
        found = self.modules.get(path)
        if found is not None:
            return found
        parts = path.split("/")[:-1]
        while parts:
            found = self.packages.get("/".join(parts) + "/")
            if found is not None:
                return found
            parts.pop()
        return None

    def raised_by_own_code(self, path: str) -> bool:
        """Whether ``path`` (project-relative) is in a project whose ``deterministic``
        types fail the same way on every restart (``deterministic_in``: vLLM)."""
        return path.startswith(tuple(f"{p}/" for p in self.deterministic_in))

    def of_log_file(self, basename: str) -> Category | None:
        """The category of vLLM's module named ``basename`` by its log prefix."""
        return self.basenames.get(basename)


def project_path(path: str) -> str | None:
    """``.../site-packages/vllm/worker/worker.py`` -> ``vllm/worker/worker.py``; None for
    a file outside the four projects."""
    match = _PROJECT_PATH.search(path)
    if match is None:
        return None
    rel = match.group(1).replace("\\", "/")
    # The last project folder on the path (a checkout under /work/vllm/vllm/... too; a
    # user named vllm's module cache, /home/vllm/.cache/.../transformers_modules/...).
    at = max(rel.rfind(f"/{project}/") for project in PROJECTS)
    return rel[at + 1 :] if at > 0 else rel


_CATEGORIES = {category.value: category for category in Category}  # Category(v), faster


def parse_provenance(raw: object, where: str, *, trusted: bool = False) -> Provenance:
    """Validate a ``provenance:`` section; raises ValueError naming the field.
    ``trusted`` (read back from the cache of validated packs): the ~3,400 path names are
    not matched against their shapes again (a fifth of a small log's pack build)."""
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: must be a mapping")
    unknown = set(raw) - _PROVENANCE_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {sorted(unknown)}")
    names = {}
    for key in ("deterministic", "deterministic_in"):
        value = raw.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"{where}.{key}: must be a list of names")
        names[key] = frozenset(value)
    if not names["deterministic_in"] <= set(PROJECTS):
        raise ValueError(f"{where}.deterministic_in: projects are {list(PROJECTS)}")
    maps: dict[str, dict[str, Category]] = {}
    for key in ("exceptions", "functions", "modules", "packages"):
        value = raw.get(key, {})
        if not isinstance(value, dict):
            raise ValueError(f"{where}.{key}: must map names to categories")
        maps[key] = {}
        for name, category in value.items():
            found = _CATEGORIES.get(category) if isinstance(category, str) else None
            if found is None:
                raise ValueError(f"{where}.{key}: {name!r}: {category!r} is not a category")
            maps[key][str(name)] = found
    shapes = (
        ("functions", r"^[\w/.]+\.py:[\w.<>]+$"),
        ("modules", r"^[\w/.]+\.py$"),
        ("packages", r"^[\w/.]+/$"),
    )
    if not trusted:
        for key, pattern in shapes:
            bad = [name for name in maps[key] if not re.match(pattern, name)]
            if bad:
                raise ValueError(f"{where}.{key}: {bad[0]!r} is not a project path")
    return Provenance(
        deterministic=names["deterministic"],
        deterministic_in=names["deterministic_in"],
        exceptions=maps["exceptions"],
        functions=maps["functions"],
        modules=maps["modules"],
        packages=maps["packages"],
        basenames=_unique_basenames(maps["modules"]),
    )


def _unique_basenames(modules: dict[str, Category]) -> dict[str, Category]:
    """vLLM's modules by file name (its log prefix names only that), where one name is
    one module."""
    seen: dict[str, list[Category]] = {}
    for path, category in modules.items():
        if path.startswith("vllm/"):
            seen.setdefault(path.rsplit("/", 1)[-1], []).append(category)
    return {name: cats[0] for name, cats in seen.items() if len(cats) == 1}
