"""Scopes and the environment: what each name (or dotted key: ``self.fc``, ``d['loss']``)
holds on the current path, how branches join, and binding assignment targets."""

from __future__ import annotations

from typing import Dict, List

import libcst as cst

from gradlint.model.names import dotted
from gradlint.model.values import (
    NAMESPACE,
    CLASS, CONST, FUNCTION, INSTANCE, MODULE, NDARRAY, OPTIMIZER, SCALAR, TENSOR, TUPLE, UNKNOWN, UNKNOWN_VALUE,
    Value,
)


Env = Dict[str, Value]
FREED = "<freed>"  # env key: the graphs freed on this path (a Value whose items are ids)


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
        if ("." in key or "[" in key) and key not in env:
            self._dotted_keys += 1
        old = env.get(key)
        if old is not None and old is not value and old.kind == TENSOR and not old.is_param:
            # the name now holds another value: later backward() calls through this name no
            # longer reach the old tensor
            self.leaf_rebinds.setdefault(old.id, len(self.events))
        env[key] = value
        self.bound_stmt[key] = self.current_statement
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
        if not envs:
            return {}
        if len(envs) == 1:
            return envs[0]
        first, rest = envs[0], envs[1:]
        out: Env = {}
        keys = list(first)
        for e in rest:
            keys.extend(k for k in e if k not in first)
        for k in keys:
            v = first.get(k)
            if v is not None and all(e.get(k) is v for e in rest):
                out[k] = v
                continue
            vals = [v] + [e.get(k) for e in rest]
            kept = [x for x in vals if x is not None and x.kind != CONST]
            if kept and all(x is kept[0] for x in kept) and kept[0].kind in (UNKNOWN, MODULE, OPTIMIZER, INSTANCE):
                # `best = None` before the loop, `best = model.state_dict()` in it: after the loop
                # the name holds that object or None (for what is no tensor, the object is kept)
                out[k] = kept[0]
            elif kept and all(x.kind == UNKNOWN for x in kept):
                # one of several opaque objects (a snapshot on one path, a copy on another): still
                # unknown, but a read of it reads each of them
                out[k] = Value(UNKNOWN, items=tuple(kept))
            elif all(x is not None and x.kind in (TENSOR, SCALAR, CONST) for x in vals) and any(
                    x.kind == TENSOR for x in vals):
                # `total = 0.0` before a loop, `total = total + loss` in it: a number when the
                # loop ran zero times, else one of these tensors (unknown, but a read reads them)
                out[k] = Value(UNKNOWN, items=tuple(x for x in kept if x.kind == TENSOR))
            if v is not None and v.kind == TUPLE and (v.made == "list" or v.items == ()):
                # a list that some path appended to: it may hold any of the elements (by position,
                # nothing is known)
                others = [e.get(k) for e in rest]
                if all(o is not None and o.kind == TUPLE and not o.params for o in others):
                    items: list = []
                    for o in [v] + others:
                        items.extend(i for i in o.items if all(i is not j for j in items))
                    out[k] = Value(TUPLE, items=tuple(items), made="joined")
        # graphs freed by backward() on every path stay freed
        freed = [e.get(FREED) for e in envs]
        if all(f is not None for f in freed):
            common = set(freed[0].items)  # type: ignore[union-attr]
            for f in freed[1:]:
                common &= set(f.items)  # type: ignore[union-attr]
            out[FREED] = Value(TUPLE, items=tuple(sorted(common)))  # type: ignore[arg-type]
        return out

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
            items = value.items if value.kind == TUPLE else ()
            if value.kind == TENSOR and value.rg is True and value.probable and not starred:
                # `out, hidden = rnn(x, hidden)`: the parts of a module's output carry its graph
                items = tuple(Value(TENSOR, rg=True, leaf=False, probable=True, deps=value.deps,
                                    cuts=value.cuts) for _ in elements)
            for i, el in enumerate(elements):
                if type(el) is cst.StarredElement:
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
                key = dotted(target)  # d["loss"] = v: a container slot with a constant index
                base_key = dotted(base)
                if base_key is not None and bv.kind == TUPLE:
                    # the container's content changed: what it holds as a whole is no longer known
                    self.bind_key(base_key, Value(TUPLE, items=(UNKNOWN_VALUE,)))
                if key is not None:
                    self.bind_key(key, value)
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
