"""``Trainer(compile_config=...)``: the model's forward compiled with ``torch.compile``, its recompilations bounded.

:func:`compile_options` checks the argument (None or False: off; True: torch's defaults; a dict: ``torch.compile``
keyword arguments). :class:`Compilation` compiles the model in place with ``nn.Module.compile`` (so parameter names,
hence checkpoints, stay those of the eager model) and keeps what algorithms do to it from recompiling it every batch:

* **Shapes.** An algorithm that changes the batch's shapes at ``AFTER_DATALOADER`` (ProgressiveResizing's image
  sizes, SeqLengthWarmup's sequence lengths, SelectiveBackprop's batch size) would otherwise make dynamo compile a
  graph for the first shape, recompile on the second one, and only then trace a dynamic graph.
  :meth:`Compilation.note_batch` compares the batch after those algorithms with the batch the loader produced and
  marks every dimension they changed dynamic (``torch._dynamo.maybe_mark_dynamic``) from then on, so the first
  graph is already dynamic in it.
* **Modules.** Surgery after compilation (LayerFreezing's ``requires_grad``, a module replaced at ``EPOCH_END``)
  invalidates the graphs. Dynamo's guards notice (unless options such as ``guard_filter_fn`` drop the guards on
  modules: then a stale graph runs), but every change costs one of the region's ``recompile_limit`` (8) entries,
  after which the model silently runs eagerly. :meth:`Compilation.refresh`, which
  the Trainer calls after ``EPOCH_START`` and ``EPOCH_END``, compares the modules and the trainable parameters with
  those compiled and, when they differ, compiles the forward afresh: a new region
  (``isolate_recompiles=True``, on by default here) whose entries and budget start from zero.
* **Inductor and image sizes.** Inductor (torch 2.14) cannot keep a convolutional network's graph dynamic in height
  and width: its lowering of the convolution's backward turns the symbolic strides into integers, so a graph marked
  dynamic is specialised to the size it traced, one graph per size all the same. Worse, on the CPU its layout
  optimization (channels-last activations) compiles the backward for the traced strides without guarding them: the
  graph is reused, and cached, for other sizes, and a relaunch that loads it from inductor's on-disk cache for
  another size fails in the first backward (``expected size 4==4, stride 48==147``; an upstream bug, with a
  plain-torch repro in the compiling guide). So, with inductor and ``dynamic`` unset, the height and width of image
  batches (dimensions 2 and up of tensors of 4 or more dimensions) are marked static instead
  (``torch._dynamo.mark_static``, which also keeps dynamo's automatic dynamic shapes off them): one graph per size,
  each with inductor's layout optimization and exact guards, and ProgressiveResizing, seeing a compiled model, takes
  4 sizes (``scale_buckets``). Other dimensions that algorithms change stay dynamic; once any is, the forward is
  compiled with inductor's ``layout_optimization`` off for this model only (its ``options``; a ``mode`` becomes the
  options it stands for), which keeps the graphs and the cache sound.

:attr:`Compilation.compilations` counts the graphs dynamo really compiled (:class:`~.graph_count.GraphCount`), and a
fall-back to eager after ``recompile_limit`` warns, naming the fixes. The recompilations of each method are bounded
in ``tests/trainer/test_compilation.py`` (a table in ``docs/guides/compiling.md``; ``benchmarks/compile_resizing.py``
relaunches inductor runs from a warm cache); compiled against eager step times, from ``benchmarks/compile.py``, are
in the README's performance section.
"""

from __future__ import annotations

import difflib
import inspect
import logging
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import torch

from composer.trainer.graph_count import GraphCount

__all__ = ["Compilation", "compile_options", "torch_compile_kwargs"]

log = logging.getLogger(__name__)

# torch.compile's modes (its docstring); a mode outside them is looked up in inductor's own list before refusing it.
_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
_BOOL_KEYS = ("fullgraph", "disable", "isolate_recompiles")
_EXAMPLE = "compile_config=True, or a dict of torch.compile options such as {'backend': 'inductor', 'dynamic': None}"

# (position in the batch, e.g. (0,) for the inputs of an (inputs, targets) pair or ('input_ids',)) -> dimensions.
_Path = tuple[Any, ...]


def _torch_compile_keys() -> list[str]:
    return [name for name in inspect.signature(torch.compile).parameters if name != "model"]


def compile_options(compile_config: Any) -> dict[str, Any] | None:
    """The keyword arguments to compile the model with, or None when ``compile_config`` turns compilation off.

    None and False are off. True compiles with torch's defaults (the inductor backend). A mapping holds
    ``torch.compile`` keyword arguments, each checked here so that a mistake is named before training starts. Unless
    the mapping says otherwise, ``isolate_recompiles=True`` (where torch has it): each compilation of a model counts
    its recompilations on its own, so neither another compiled model in the process nor an earlier compilation of
    this one (before surgery) uses up its ``recompile_limit``.

    Args:
        compile_config (bool | Mapping | None): What the Trainer was given.

    Returns:
        dict | None: ``torch.compile`` keyword arguments, or None.

    Raises:
        TypeError: If ``compile_config`` is neither None, a bool nor a mapping, or an option has the wrong type.
        ValueError: If an option is not a ``torch.compile`` argument, or its value is not one torch accepts.

    Example:
        >>> compile_options(None) is None, compile_options(True)
        (True, {'isolate_recompiles': True})
        >>> compile_options({"backend": "eager", "dynamic": True})
        {'isolate_recompiles': True, 'backend': 'eager', 'dynamic': True}
        >>> compile_options({"backnd": "eager"})
        Traceback (most recent call last):
        ...
        ValueError: compile_config={'backnd': 'eager'} has the key 'backnd', which is not a torch.compile option. ...
    """
    if compile_config is None or compile_config is False:
        return None
    keys = _torch_compile_keys()
    defaults = {"isolate_recompiles": True} if "isolate_recompiles" in keys else {}
    if compile_config is True:
        return defaults
    if not isinstance(compile_config, Mapping):
        raise TypeError(
            f"compile_config={compile_config!r} ({type(compile_config).__name__}) is not a compile configuration. "
            f"Expected None or False (no compilation), {_EXAMPLE}."
        )
    options = dict(compile_config)
    for key, value in options.items():
        if key not in keys:
            close = difflib.get_close_matches(str(key), keys, n=1)
            fix = f"Did you mean {close[0]!r}? " if close else ""
            raise ValueError(
                f"compile_config={options!r} has the key {key!r}, which is not a torch.compile option. {fix}The "
                f"options are torch.compile's keyword arguments: {', '.join(keys)}."
            )
        _check_value(options, key, value)
    if options.get("mode") is not None and options.get("options") is not None:
        raise ValueError(
            f"compile_config={options!r} sets both 'mode' and 'options', which torch.compile refuses together. To "
            "fix, keep one: a mode sets a group of inductor options (torch._inductor.list_mode_options(mode) lists "
            "them), so write those into 'options' to change one of them."
        )
    return {**defaults, **options}


def _check_value(options: dict[str, Any], key: str, value: Any) -> None:
    given = f"compile_config={options!r}"
    if key in _BOOL_KEYS and not isinstance(value, bool):
        raise TypeError(f"{given}: {key!r} must be True or False, got {value!r}. To fix: {{{key!r}: True}}.")
    if key == "dynamic" and value is not None and not isinstance(value, bool):
        raise TypeError(
            f"{given}: 'dynamic' must be True, False or None (detect: the default), got {value!r}. To fix: "
            "{'dynamic': None}."
        )
    if key == "backend":
        _check_backend(given, value)
    if key == "mode" and value is not None:
        _check_mode(given, value)
    if key == "options" and value is not None and not (isinstance(value, Mapping) and all(map(_is_str, value))):
        raise TypeError(
            f"{given}: 'options' must be a dict of backend options by name (such as {{'epilogue_fusion': True}}), "
            f"got {value!r}."
        )
    if key == "recompile_limit" and value is not None and (type(value) is not int or value < 1):
        raise ValueError(f"{given}: 'recompile_limit' must be a positive int or None, got {value!r}. To fix: 8.")
    if key == "name" and value is not None and not isinstance(value, str):
        raise TypeError(f"{given}: 'name' must be a string or None, got {value!r}.")


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _check_backend(given: str, backend: Any) -> None:
    if callable(backend):
        return
    import torch._dynamo

    known = sorted(torch._dynamo.list_backends(exclude_tags=()))
    if not isinstance(backend, str) or backend not in known:
        close = difflib.get_close_matches(str(backend), known, n=1)
        fix = f" To fix: {{'backend': {close[0]!r}}}." if close else ""
        raise ValueError(
            f"{given}: backend={backend!r} is not a torch.compile backend; expected one of {known} (or a callable "
            f"backend).{fix} Tests and quick checks use 'eager' or 'aot_eager' (no C compiler needed)."
        )


def _check_mode(given: str, mode: Any) -> None:
    if mode in _MODES:
        return
    import torch._inductor

    known = sorted(torch._inductor.list_mode_options())
    if not isinstance(mode, str) or mode not in known:
        raise ValueError(f"{given}: mode={mode!r} is not a torch.compile mode; expected None or one of {known}.")


class Compilation:
    """The model's forward compiled in place with ``torch.compile``, recompiled only when an algorithm changes it.

    The Trainer builds one when given ``compile_config`` and calls :meth:`compile` after ``INIT`` surgery, before the
    model is wrapped in DistributedDataParallel (after the checkpoint is loaded) or sharded by FSDP, as PyTorch's
    guide has it: ``model.compile()``, then the wrapper. Compilation is lazy: the first forward traces, so the graph
    always sees the loaded weights. ``nn.Module.compile`` changes no module, so ``state.model``, its
    ``state_dict`` keys (no ``_orig_mod.``) and the checkpoints stay those of the eager model: a compiled run and an
    eager run load each other's checkpoints.

    Per batch (compiled runs only): :meth:`note_batch` after ``AFTER_DATALOADER`` and :meth:`mark_dynamic` on the
    microbatches; per epoch: :meth:`refresh`. See the module docstring for why.

    Args:
        options (Mapping): ``torch.compile`` keyword arguments, as :func:`compile_options` returns them.

    Attributes:
        dynamic_dims (dict): The batch's dimensions that algorithms change, marked dynamic, by position in the batch.
        static_dims (dict): With inductor (and ``dynamic`` unset), the height and width (dimensions 2 and up of a
            tensor of 4 or more dimensions) that algorithms change, marked static instead: one graph per size.
        compilations (int): The graphs dynamo compiled for the model, training and evaluation, recompilations
            included (counted from dynamo's own counters while the forward runs): 1 for a model without graph
            breaks and one training mode, whatever sizes the algorithms give the batch.
        regions (int): How often the forward was compiled in place (``model.compile``): 1, plus one per change of the
            modules, plus one when the first dimensions become dynamic with inductor (see the module docstring).
        fell_back_to_eager (bool): Whether the forward reached ``recompile_limit`` and runs some shapes eagerly.

    Example:
        >>> compilation = Compilation({"backend": "eager"})
        >>> model = torch.nn.Linear(4, 2)
        >>> compilation.compile(model)
        >>> model(torch.ones(3, 4)).shape, list(model.state_dict())
        (torch.Size([3, 2]), ['weight', 'bias'])
        >>> model.weight.requires_grad_(False)  # surgery after compilation: compiled afresh, once
        Parameter containing: ...
        >>> compilation.refresh(model), compilation.refresh(model), compilation.regions, compilation.compilations
        (True, False, 2, 1)
    """

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.options = dict(options)
        self.dynamic_dims: dict[_Path, set[int]] = {}
        self.static_dims: dict[_Path, set[int]] = {}
        self.regions = 0
        self._count = GraphCount(self.options.get("recompile_limit"))
        self._model: torch.nn.Module | None = None
        self._signature: tuple[Any, ...] | None = None
        # Whether the graphs take dynamic shapes: from the start with dynamic=True, else once note_batch marks some.
        self._dynamic = self.options.get("dynamic") is True

    @property
    def compilations(self) -> int:
        """The graphs dynamo compiled for the model (see the class docstring)."""
        return self._count.graphs

    @property
    def fell_back_to_eager(self) -> bool:
        """Whether the forward reached ``recompile_limit``, so that some shapes run eagerly."""
        return self._count.fell_back_to_eager

    def compile(self, model: torch.nn.Module) -> None:
        """Compiles ``model``'s forward in place (``model.compile(**options)``); nothing is traced until it runs."""
        if not hasattr(model, "compile"):  # torch < 2.2
            raise RuntimeError(
                f"compile_config needs nn.Module.compile (torch >= 2.2); this is torch {torch.__version__}. To fix, "
                "upgrade torch or leave compile_config=None."
            )
        model.compile(**torch_compile_kwargs(self.options, self._dynamic))
        # nn.Module.compile stores torch.compile(model._call_impl) there, and __call__ calls it: count what it compiles.
        compiled = model._compiled_call_impl
        assert compiled is not None, "nn.Module.compile sets _compiled_call_impl"
        model._compiled_call_impl = self._count.wrap(compiled)
        self.regions += 1
        self._model, self._signature = model, _signature(model)

    def refresh(self, model: torch.nn.Module) -> bool:
        """Compiles ``model`` afresh if its modules or trainable parameters changed since :meth:`compile`.

        Returns:
            bool: Whether it recompiled.
        """
        signature = _signature(model)
        if signature == self._signature:
            return False
        log.info(
            "compile_config: the model's modules or trainable parameters changed (surgery after compilation); its "
            "forward is compiled afresh."
        )
        self.compile(model)
        return True

    def note_batch(self, loaded: Any, batch: Any) -> None:
        """Learns the dimensions in which algorithms made ``batch`` differ from ``loaded`` (the loader's), and marks
        the ones learned so far on ``batch``: dynamic, or, for inductor, an image's height and width static."""
        if batch is loaded:
            return
        before = dict(_tensors(loaded))
        for path, tensor in _tensors(batch):
            original = before.get(path)
            if original is None or original.ndim != tensor.ndim or original.shape == tensor.shape:
                continue
            changed = {d for d in range(tensor.ndim) if original.shape[d] != tensor.shape[d]}
            if self._static_images and tensor.ndim >= 4:  # inductor: one static graph per image size
                spatial = {d for d in changed if d >= 2}
                changed -= spatial
                self._learn(self.static_dims, path, spatial, "static: one graph per size")
            self._learn(self.dynamic_dims, path, changed, "dynamic")
        if any(self.dynamic_dims.values()) and not self._dynamic and self.options.get("dynamic") is not False:
            self._compile_for_dynamic_shapes()
        self.mark_dynamic(batch)

    @property
    def _static_images(self) -> bool:
        # Inductor specialises a convolution's backward to the traced height and width (its lowering of
        # convolution_backward guards the strides to integers, torch 2.14): marked dynamic, they would cost the
        # layout optimization and still compile a graph per size. With dynamic=True the user asked otherwise.
        return self.options.get("backend", "inductor") == "inductor" and self.options.get("dynamic") is None

    def _learn(self, learned: dict[_Path, set[int]], path: _Path, dims: set[int], kind: str) -> None:
        known = learned.get(path, set())
        if dims <= known:
            return
        learned[path] = known | dims
        log.info("compile_config: dimensions %s of the batch at %s vary; marked %s.", sorted(known | dims), path, kind)
        if self.options.get("dynamic") is False:
            warnings.warn(
                f"compile_config has dynamic=False, but the algorithms change dimensions {sorted(known | dims)} of "
                f"the batch at {path}: every new size compiles a graph of its own, and after recompile_limit "
                "of them the model runs eagerly. To fix, leave 'dynamic' out of compile_config (or None), "
                "or keep the sizes fewer than recompile_limit (ProgressiveResizing(scale_buckets=4)).",
                UserWarning,
                stacklevel=3,
            )

    def _compile_for_dynamic_shapes(self) -> None:
        self._dynamic = True
        if self._model is not None and torch_compile_kwargs(self.options, True) != self.options:
            log.info("compile_config: the forward is compiled afresh for dynamic shapes (layout_optimization off).")
            self.compile(self._model)

    def mark_dynamic(self, batch: Any) -> None:
        """Marks the learned dimensions of ``batch``'s tensors, so that no new size recompiles the forward: dynamic,
        or static (:attr:`static_dims`), which keeps dynamo from making them dynamic on its own.

        Not with ``dynamic=False``: that asks for static graphs, one per size (dynamo would follow the marks)."""
        if not (self.dynamic_dims or self.static_dims) or self.options.get("dynamic") is False:
            return
        import torch._dynamo

        for path, tensor in _tensors(batch):
            dims = self.dynamic_dims.get(path)
            if dims:
                torch._dynamo.maybe_mark_dynamic(tensor, [d for d in dims if d < tensor.ndim])
            for dim in self.static_dims.get(path, ()):
                if dim < tensor.ndim:
                    torch._dynamo.mark_static(tensor, dim)


def torch_compile_kwargs(options: Mapping[str, Any], dynamic: bool) -> dict[str, Any]:
    """The keyword arguments for ``model.compile``: ``options``, and for graphs with ``dynamic`` shapes compiled by
    inductor, inductor's ``layout_optimization`` off (unless ``options`` sets it). A ``mode`` then becomes the inductor
    options it stands for, since torch.compile takes either. The ``options`` dict is a copy: torch.compile pops keys.

    Example:
        >>> torch_compile_kwargs({"isolate_recompiles": True}, dynamic=False)
        {'isolate_recompiles': True}
        >>> torch_compile_kwargs({"isolate_recompiles": True}, dynamic=True)
        {'isolate_recompiles': True, 'options': {'layout_optimization': False}}
        >>> torch_compile_kwargs({"backend": "aot_eager"}, dynamic=True)  # no inductor: no layout optimization
        {'backend': 'aot_eager'}
        >>> torch_compile_kwargs({"mode": "max-autotune-no-cudagraphs"}, dynamic=True)["options"]["max_autotune"]
        True
    """
    kwargs = dict(options)
    if isinstance(kwargs.get("options"), Mapping):
        kwargs["options"] = dict(kwargs["options"])
    if not dynamic or kwargs.get("backend", "inductor") != "inductor":
        return kwargs
    mode = kwargs.pop("mode", None)
    inductor: dict[str, Any] = {}
    if mode not in (None, "default"):
        import torch._inductor

        inductor.update(torch._inductor.list_mode_options(mode, kwargs.get("dynamic")))
    kwargs["options"] = {**inductor, "layout_optimization": False, **(kwargs.get("options") or {})}
    return kwargs


def _signature(model: torch.nn.Module) -> tuple[Any, ...]:
    """What the compiled graphs depend on that surgery changes: which module objects the model holds, and each
    parameter's name, shape and whether it trains. FSDP's sharding, after compilation, changes none of them (it swaps
    the modules' classes in place and the parameters for DTensors of the same global shape)."""
    modules = tuple(id(m) for m in model.modules())
    parameters = tuple((name, p.requires_grad, tuple(p.shape)) for name, p in model.named_parameters())
    return modules, parameters


def _tensors(batch: Any, path: _Path = (), depth: int = 0) -> Iterator[tuple[_Path, torch.Tensor]]:
    """The tensors of a batch (a tensor, or lists, tuples and mappings of them), each with its position."""
    if isinstance(batch, torch.Tensor):
        yield path, batch
    elif depth < 4 and isinstance(batch, (list, tuple)):
        for index, item in enumerate(batch):
            yield from _tensors(item, (*path, index), depth + 1)
    elif depth < 4 and isinstance(batch, Mapping):
        for key, item in batch.items():
            yield from _tensors(item, (*path, key), depth + 1)
