"""Fields of a recipe's algorithm that the recipe fills in from its model: ALiBi's paths.

In Python, :meth:`Alibi.from_model(model, max_sequence_length=128) <composer.algorithms.Alibi.from_model>` finds the
model's attention class and position embedding. A recipe gets the same: ``alibi: {max_sequence_length: 128}`` is
filled in from the recipe's ``model`` with exactly what ``Alibi.from_model`` gives for that model, which it reads from
the model's structure, built without weights (:meth:`~composer.config.ModelHparams.initialize_structure`). The config
class, :class:`~composer.algorithms.AlibiHparams`, keeps the original Composer API's required fields (the four dotted
paths); the recipe layer fills them in before building it, so ``composer train --print-config`` shows them.

The paths are filled in when the entry gives none of the four required ones (``position_embedding_attribute``,
``attention_module_name``, ``attr_to_replace``, ``alibi_attention``); ``mask_replacement_function`` is filled in too
unless the entry sets it. An entry that gives some of the four but not all is refused (naming the missing ones), and so
is a model ALiBi has no built-in policy for (naming the recipe key and the fix).

Example:
    >>> from composer.config.models import GPTHparams
    >>> model = GPTHparams(n_layer=1, n_embd=32, n_head=2)
    >>> problems = []
    >>> filled = fill_from_model({"alibi": {"max_sequence_length": 128}}, model, "model.gpt", problems)
    >>> filled["alibi"]["position_embedding_attribute"], filled["alibi"]["attention_module_name"], problems
    ('wpe', 'composer.models.gpt.CausalSelfAttention', [])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from composer.algorithms import Alibi
from composer.algorithms.alibi import ALIBI_POLICIES
from composer.config.config_error import ConfigError
from composer.config.models import ModelHparams

__all__ = ["ALIBI_PATHS", "FROM_MODEL", "fill_alibi", "fill_from_model"]

ALIBI_PATHS = ("position_embedding_attribute", "attention_module_name", "attr_to_replace", "alibi_attention")
"""The fields of :class:`~composer.algorithms.AlibiHparams` a recipe may leave to its model."""


def fill_alibi(fields: Mapping[str, Any], model: ModelHparams | None, model_path: str) -> dict[str, Any]:
    """``fields`` of an ``alibi`` entry, with the model's paths filled in when it gives none of :data:`ALIBI_PATHS`.

    Args:
        fields: The entry's fields as the recipe gives them.
        model: The recipe's model config; None when it is missing or invalid (a problem reported at its key).
        model_path: Its key path (``model.huggingface``), for the messages.

    Returns:
        dict: The fields, with ``Alibi.from_model``'s paths for the model added.

    Raises:
        ConfigError: At ``algorithms.alibi``: some of the paths given but not all, a model with no built-in policy, or
            a model whose structure cannot be built; each names the fix.
    """
    given = [name for name in ALIBI_PATHS if fields.get(name) is not None]
    if given:
        missing = [name for name in ALIBI_PATHS if name not in given]
        if missing:
            raise ConfigError(
                "algorithms.alibi",
                f"gives {given} but not {missing}. Give all four paths, or none of them: the recipe then fills them "
                f"in from {model_path}, as Alibi.from_model does.",
            )
        return dict(fields)
    if model is None:
        raise ConfigError(
            "algorithms.alibi", f"its paths are filled in from {model_path}, which is missing or invalid; fix it first."
        )
    try:
        structure = model.initialize_structure()
    except (ImportError, ValueError, TypeError, RuntimeError) as error:
        raise ConfigError(
            "algorithms.alibi",
            f"cannot fill in ALiBi's paths from {model_path}, whose structure fails to build ({type(error).__name__}: "
            f"{error}). Fix {model_path}, or give the paths under algorithms.alibi: {', '.join(ALIBI_PATHS)}.",
        ) from None
    try:
        alibi = Alibi.from_model(structure)
    except ValueError:
        raise ConfigError(
            "algorithms.alibi",
            f"cannot fill in ALiBi's paths from {model_path}: its model ({type(structure).__name__}) has none of the "
            f"attention classes ALiBi has a policy for (families {list(ALIBI_POLICIES)}). Use a model it knows "
            "(model.gpt, or model.huggingface with model_type gpt2 or bert), or give the four paths under "
            f"algorithms.alibi ({', '.join(ALIBI_PATHS)}; the ALiBi method card shows them).",
        ) from None
    filled = {**fields, **{name: getattr(alibi, name) for name in ALIBI_PATHS}}
    filled.setdefault("mask_replacement_function", alibi.mask_replacement_function)  # unless the entry sets it
    return filled


FROM_MODEL: dict[str, Callable[[Mapping[str, Any], ModelHparams | None, str], dict[str, Any]]] = {"alibi": fill_alibi}
"""Algorithm registry name -> the function that fills in its entry's fields from the recipe's model."""


def fill_from_model(algorithms: Any, model: ModelHparams | None, model_path: str, problems: list[ConfigError]) -> Any:
    """The recipe's ``algorithms`` (a mapping or a list, as written), with the entries of :data:`FROM_MODEL` filled in.

    Args:
        algorithms: The ``algorithms`` value as the recipe gives it.
        model: The recipe's model config; None when it is missing or invalid (reported at its key).
        model_path: The model's key path (``model.gpt``), for the messages.
        problems: Where an entry that cannot be filled in reports its problem (the entry is then left out).

    Returns:
        The value in the same form, entries filled in.
    """

    def fill(name: Any, fields: Any) -> Any:
        if name not in FROM_MODEL or not (fields is None or isinstance(fields, Mapping)):
            return fields  # not filled from the model, switched off, or malformed (reported when built)
        try:
            return FROM_MODEL[name](fields or {}, model, model_path)
        except ConfigError as error:
            problems.append(error)
            return False  # left out, as an entry switched off

    if isinstance(algorithms, Mapping):
        return {name: fill(name, fields) for name, fields in algorithms.items()}
    if isinstance(algorithms, list):
        return [_fill_item(item, fill) for item in algorithms]
    return algorithms


def _fill_item(item: Any, fill: Callable[[Any, Any], Any]) -> Any:
    """One item of the list form: a name (its defaults) or a one-key mapping ``{name: fields}``."""
    if isinstance(item, str) and item in FROM_MODEL:
        return {item: fill(item, None)}
    if isinstance(item, Mapping) and len(item) == 1:
        ((name, fields),) = item.items()
        return {name: fill(name, fields)}
    return item
