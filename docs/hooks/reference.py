"""Which public names the API reference documents, and on which page.

Every package of ``composer`` that defines ``__all__`` gets a page, plus the modules in :data:`MODULE_PAGES` whose
import path users type (``composer.optim.scheduler``). A name exported from several places is documented once, on
the first page of :func:`reference_modules` that exports it (the import path a user would write), and the other
pages link to it. Nothing here is written by hand per name, so a new public name appears on the site by itself.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MODULE_PAGES", "Page", "public_names", "reference_modules", "reference_pages", "source_path"]

# Pages first, in the order that decides where a name exported by several of them is documented: the trainer and the
# core vocabulary, then the functional forms before the algorithms package (so ``composer.functional.mixup_batch`` is
# the documented path), the scheduler module where MosaicML Composer's users look for it, then the rest.
MODULE_PAGES = [
    "composer.trainer",
    "composer.core",
    "composer.functional",
    "composer.algorithms",
    "composer.optim.scheduler",
    "composer.optim.decoupled_weight_decay",
    "composer.optim.optimizer_hparams",
    "composer.optim",
    "composer.models",
    "composer.datasets",
    "composer.callbacks",
    "composer.loggers",
    "composer.utils",
    "composer.config",
    "composer.cli",
]


@dataclass
class Page:
    """One reference page: the module, the names it documents in full, and the names it links to elsewhere."""

    module: str
    documented: list[str] = field(default_factory=list)
    elsewhere: dict[str, str] = field(default_factory=dict)  # name -> the full path where it is documented
    folded: list[Page] = field(default_factory=list)  # near-empty subpackages shown as sections of this page

    @property
    def uri(self) -> str:
        """The page's path under the site's docs directory."""
        return f"reference/{self.module}.md"


def _packages() -> list[str]:
    """Every package under ``composer`` (imported, so their ``__all__`` is the one users see)."""
    import composer

    names = ["composer"]
    for info in pkgutil.walk_packages(composer.__path__, "composer."):
        if info.ispkg:
            names.append(info.name)
    return names


def reference_modules() -> list[str]:
    """The modules with a reference page, in documenting order: :data:`MODULE_PAGES`, the other packages, ``composer``."""
    packages = [name for name in _packages() if hasattr(importlib.import_module(name), "__all__")]
    rest = sorted(name for name in packages if name not in MODULE_PAGES and name != "composer")
    return [*MODULE_PAGES, *rest, "composer"]


def _key(module: str, name: str, value: Any) -> Any:
    # Plain values (a version string, a number) may be equal by accident: they are the same name only in one module.
    if value is None or isinstance(value, str | int | float | bool):
        return (module, name)
    return id(value)


def _reading_order(module: str, names: list[str]) -> list[str]:
    """``names`` (from ``module.__all__``) in the order a reader wants them on the page.

    The class the module is named after first (``Trainer`` on ``composer.trainer``), the configs (``*Hparams``) after
    everything they configure (the scheduler functions before their Hparams), otherwise ``__all__``'s order.
    """
    noun = module.rpartition(".")[2].replace("_", "")

    def rank(name: str) -> int:
        return 0 if name.lower() == noun else 2 if name.endswith("Hparams") else 1

    return sorted(names, key=rank)  # stable: the order of __all__ within each rank


def reference_pages() -> list[Page]:
    """Every reference page, each name documented on exactly one of them."""
    pages: list[Page] = []
    documented_at: dict[Any, str] = {}
    for module_name in reference_modules():
        module = importlib.import_module(module_name)
        page = Page(module_name)
        for name in _reading_order(module_name, list(module.__all__)):
            key = _key(module_name, name, getattr(module, name))
            if key in documented_at:
                page.elsewhere[name] = documented_at[key]
            else:
                documented_at[key] = f"{module_name}.{name}"
                page.documented.append(name)
        pages.append(page)
    return pages


# A subpackage that documents at most this many names of its own is a section of its parent's page, not a page.
NEAR_EMPTY = 1


def fold_near_empty(pages: list[Page]) -> list[Page]:
    """``pages`` without the near-empty ones, each folded into its parent package's page (``Page.folded``).

    A page of a subpackage that documents at most :data:`NEAR_EMPTY` names (``composer.algorithms.mixup``, whose
    names are all documented under ``composer.algorithms`` and ``composer.functional``) would be an empty page in the
    navigation; its parent's page shows its docstring and its own names instead.
    """
    by_module = {page.module: page for page in pages}
    kept = []
    for page in pages:
        parent = by_module.get(page.module.rpartition(".")[0])
        if parent is not None and len(page.documented) <= NEAR_EMPTY:
            parent.folded.append(page)
        else:
            kept.append(page)
    return kept


def page_of(pages: list[Page]) -> dict[str, str]:
    """Module -> the page that shows it: its own, or its parent's where it is folded."""
    return {
        **{folded.module: page.uri for page in pages for folded in page.folded},
        **{page.module: page.uri for page in pages},
    }


def public_names() -> dict[str, Any]:
    """Every documented public name, by the full path it is documented under, with its value."""
    return {
        f"{page.module}.{name}": getattr(importlib.import_module(page.module), name)
        for page in reference_pages()
        for name in page.documented
    }


def source_path(path: str, value: Any) -> str:
    """The path mkdocstrings and griffe should read the public name ``path`` (whose value is ``value``) from.

    Usually ``path`` itself. But a function named like the module that defines it (``colout`` in
    ``composer/algorithms/colout/colout.py``) is shadowed there: read statically, ``composer.algorithms.colout.colout``
    is the module, and so is every path that re-exports it. Such a name is read from its definition instead.
    """
    if (inspect.isroutine(value) or inspect.isclass(value)) and value.__module__.rpartition(".")[2] == value.__name__:
        return f"{value.__module__}.{value.__qualname__}"
    return path
