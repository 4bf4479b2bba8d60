"""Scopes and the environment: what each name (or dotted key: ``self.fc``, ``d['loss']``)
holds on the current path, how branches join, and binding assignment targets."""

from __future__ import annotations

from typing import Dict, List

import libcst as cst

from gradlint.model.containers import NAMED_TUPLE
from gradlint.model.freezing import attribute_bound, unfreezes_elsewhere
from gradlint.model.lattice import FREED, join_envs  # noqa: F401 (FREED re-exported)
from gradlint.model.names import dotted
from gradlint.model.values import (
    NAMESPACE, CLASS, FUNCTION, INSTANCE, MODULE, NDARRAY, TENSOR, TUPLE, UNKNOWN, UNKNOWN_VALUE, Value,
)


Env = Dict[str, Value]


class EnvMixin:
    def lookup(self, key: str) -> Value:
        return self.env.get(key, UNKNOWN_VALUE)

    # ------------------------------------------------------------------ environment
    def bind_key(self, key: str, value: Value) -> None:
        env = self.env
        if self._dotted_keys:
            stale = [k for k in env if k.startswith(key) and k[len(key):len(key) + 1] in (".", "[")]
            for k in stale:
                del env[k]
                self._dotted_keys -= 1
        if "." in key or "[" in key:
            if key not in env:
                self._dotted_keys += 1
            # `self.head = nn.Linear(...)` after a freeze: the parts bound before stay frozen (freezing.py)
            parts = attribute_bound(env, key, value)
            if parts and self.class_attrs and self.class_stack and self.function_stack \
                    and self.function_stack[-1].name.value == "__init__" \
                    and not unfreezes_elsewhere(self, self.class_stack[-1].name.value):
                for part in parts:
                    if part in self.class_attrs[-1]:
                        self.class_attrs[-1][part] = env[part]  # (the submodule of every method, below)
        old = env.get(key)
        if old is not None and old is not value and old.kind == TENSOR and not old.is_param:
            # the name now holds another value: later backward() calls through this name no
            # longer reach the old tensor
            self.leaf_rebinds.setdefault(old.id, len(self.events))
        env[key] = value
        self.bound_stmt[key] = self.current_statement
        if value.kind == UNKNOWN and value.params is False:
            self.freeze(key)  # `self.ema = copy.deepcopy(model).requires_grad_(False)`
        loop = self.own_loop()
        if loop is not None:
            loop.products.setdefault(id(self.current_statement), set()).add(value.id)
        if loop is not None and key in loop.outer:
            first = loop.first_use
            if key not in first:
                first[key] = None  # rebound before any read
            elif first[key] is self.current_statement and not (value.kind == TENSOR and value.rg is True):
                first[key] = None  # `hidden = hidden.detach()`: the read only cut the graph
        if self.scope_kind == "module" and "." not in key:
            if value.kind in (FUNCTION, CLASS, NAMESPACE):
                self.definitions[key] = value
            else:
                self.definitions.pop(key, None)
        if (
            value.kind == MODULE
            and self.class_attrs
            and key.startswith("self.")
            and self.function_stack
            and self.function_stack[-1].name.value == "__init__"
        ):
            self.class_attrs[-1][key] = value  # a submodule: the same object in every method

    def unbind(self, key: str) -> None:
        if key in self.env:
            if "." in key or "[" in key:
                self._dotted_keys -= 1
            del self.env[key]

    def snapshot(self) -> Env:
        return dict(self.env)

    def restore(self, env: Env) -> None:
        self.env = env
        self._dotted_keys = sum(1 for k in env if "." in k or "[" in k)

    @staticmethod
    def join(envs: List[Env]) -> Env:
        """The environment after paths ending in ``envs``: see lattice.py (must and may views)."""
        return join_envs(envs)

    def freed_ids(self) -> set:
        """Ids of graph values whose saved tensors a backward() on this path has freed."""
        f = self.env.get(FREED)
        return set(f.items) if f is not None else set()  # type: ignore[arg-type]

    # ------------------------------------------------------------------ binding targets
    def bind_target(self, target: cst.BaseExpression, value: Value) -> None:
        if type(target) is cst.Name:
            self.imports.forget(target.value)
            self.bind_key(target.value, value)
        elif type(target) is cst.Attribute:
            key = dotted(target)
            if key is not None:
                self.bind_key(key, value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            elements = target.elements
            starred = any(type(e) is cst.StarredElement for e in elements)
            if value.kind == INSTANCE and value.made == NAMED_TUPLE:
                value = Value(TUPLE, items=value.items)  # `loss, logits = out`: by position
            items = value.items if value.kind == TUPLE else ()
            parts = self.unpack_parts(value, len(elements)) if not starred else None  # `q, k, v = h.chunk(3)`
            if parts is not None:
                items = tuple(parts)
            elif value.kind == TENSOR and value.rg is True and value.probable and not starred:
                # `out, hidden = rnn(x, hidden)`: the parts of a module's output carry its graph
                items = tuple(Value(TENSOR, rg=True, leaf=False, probable=True, deps=value.deps, mdeps=value.mdeps,
                                    cuts=value.cuts) for _ in elements)
            parts = self.unpack(elements, value) if starred else None
            for i, el in enumerate(elements):
                if parts is not None:
                    self.bind_target(el.value, parts[i])  # `first, *rest = xs`
                elif type(el) is cst.StarredElement:
                    self.bind_target(el.value, UNKNOWN_VALUE)
                elif not starred and len(items) == len(elements):
                    self.bind_target(el.value, items[i])
                else:
                    self.bind_target(el.value, UNKNOWN_VALUE)
        elif type(target) is cst.Subscript:
            # x[i] = v: an in-place write into x
            base = target.value
            bv = self.value_of(base)
            if bv.kind in (TENSOR, NDARRAY):
                self.inplace(self.current_statement, bv, "item assignment")
                self._inplace_effect(base, [value])
            else:
                # d["loss"] = v, xs[i] = v: a store into a container (containers.py); a slot with
                # a constant index also has a key of its own (`d['loss']`)
                self.rebind_element(target, value)
        elif type(target) is cst.StarredElement:
            self.bind_target(target.value, UNKNOWN_VALUE)

    def forget_target(self, target: cst.BaseExpression) -> None:
        if isinstance(target, (cst.Name, cst.Attribute)):
            key = dotted(target)
            if key is not None:
                self.unbind(key)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for el in target.elements:
                self.forget_target(el.value)
