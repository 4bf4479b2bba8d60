"""The model: what each name holds at each statement, and the grad mode.

It is flow-sensitive within a function (and at module level): statements are executed in order;
``if``/``try`` branches are joined (``lattice``: what holds on every path, what may hold); loops,
calls and objects are described in their own modules. ``Model`` is composed of one mixin per
part, each in a file named for it:

- ``values``: the abstract values, ``lattice``: their joins, ``env``: scopes and the environment,
- ``statements``: assignments and in-place writes, ``expressions``: expressions and the torch API,
- ``containers``: lists, tuples, dicts, module containers, dataclass and NamedTuple instances,
- ``calls``: calls and summaries (functions, lambdas and methods of the file),
- ``objects``: modules and instances, ``loops``: loops, ``events``: training events,
- ``multiviews``: the parts of chunk/split/unbind (views torch forbids writing in place),
- ``customviews``: views made inside a custom Function (a Function's view output, the outputs
  of a module with a full backward hook), which torch forbids writing in place too,
- ``shapes``: element counts (one, several, one per sample) as far as ``backward()`` needs them,
- ``scores``: log-probabilities (`.log_prob(...)`) and the differences that weight them,
- ``freezing``: modules frozen as a whole (flow-sensitive), ``modes``: train/eval mode,
- ``selfbinds``: what a method binds on its own object, ``pathconds``: the conditions of the
  paths through a loop iteration (for rules that ask whether a path runs one call and skips another).

Rules query it through ``value_of(expr)``, ``grad_enabled``, ``qualname(expr)`` and the events
it emits (``on_backward``). Only ``gradlint.model.walk`` drives it.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

import libcst as cst

from gradlint.model.calls import INLINE_BUDGET, CallMixin
from gradlint.model.containers import ContainerMixin
from gradlint.model.env import FREED, Env, EnvMixin  # noqa: F401 (re-exported)
from gradlint.model.events import Event, EventMixin  # noqa: F401
from gradlint.model.weights import WeightMixin
from gradlint.model.dtypes import DtypeMixin
from gradlint.model.expressions import ExpressionMixin
from gradlint.model.factories import FactoryMixin
from gradlint.model.imports import ImportMixin, ModuleScope
from gradlint.model.loops import Loop, LoopMixin  # noqa: F401
from gradlint.model.names import ImportMap, canonical
from gradlint.model.multiviews import MultiViewMixin
from gradlint.model.customviews import CustomViewMixin
from gradlint.model.objects import ObjectMixin
from gradlint.model.scores import ScoreMixin
from gradlint.model.shapes import ShapeMixin
from gradlint.model.statements import StatementMixin
from gradlint.model.values import UNKNOWN_VALUE, Value, element_of  # noqa: F401


class Model(EnvMixin, StatementMixin, ExpressionMixin, CallMixin, FactoryMixin, DtypeMixin, ObjectMixin,
            LoopMixin, EventMixin, ImportMixin, ShapeMixin, ContainerMixin, WeightMixin, MultiViewMixin,
            CustomViewMixin, ScoreMixin):
    def __init__(self, emit: Callable[[str, Tuple[Any, ...]], None]) -> None:
        self.imports = ImportMap()
        self.root_text: Optional[str] = None  # the linted file's source (Walker.run)
        self.env: Env = {}
        self.grad_enabled: Optional[bool] = True
        # True while grad mode is on only by assumption (a function body without decorators or
        # an explicit context): its callers decide
        self.grad_assumed = False
        # callee name -> [(enclosing function name or None, "off" | "assumed" | "on")]
        self.calls: Dict[str, List[Tuple[Optional[str], str]]] = {}
        self.current_statement: Any = None
        self.scope_kind: str = "module"  # module | function | class
        self.class_stack: List[cst.ClassDef] = []
        self.function_stack: List[cst.FunctionDef] = []
        self.loop_depth = 0
        self.module_classes: Dict[str, Value] = {}
        # ids of values that something called backward()/autograd.grad() on
        self.backwarded: set = set()
        # ids of the values any backward() so far went through
        self.backwarded_deps: set = set()
        # ids of tensors whose .grad was read, or that were handed to code the model does not
        # know (an optimizer, a helper function): their use as a leaf may be intended
        self.used_as_leaf: set = set()
        # value id -> [(id of the value whose backward needs it, what saved it)]
        self.saved: Dict[int, List[Tuple[int, str]]] = {}
        # a view's base (basic indexing, .view(), ...), by the view's id: views share their base's
        # storage and version counter, so saving a view saves what an in-place write to the base changes
        self.view_base: Dict[int, Any] = {}
        # the parts of chunk/split/unbind (multiviews.py)
        self.multi_views: Dict[int, str] = {}
        self.part_seqs: set = set()
        # views made inside a custom Function: modules with a full backward hook, their handles,
        # the views, the Functions that return views, and the order of nn.Sequential's layers
        # (customviews.py)
        self.hooked: Dict[int, Any] = {}
        self.hook_handles: Dict[int, int] = {}
        self.custom_views: Dict[int, str] = {}
        self.view_functions: Dict[int, str] = {}
        self.next_layer: Dict[int, Value] = {}
        self.inplace_scans: Dict[int, Tuple[Any, bool]] = {}
        # per enclosing class: "self.<attr>" -> the module/method value assigned in the class
        self.class_attrs: List[Dict[str, Value]] = []
        # per enclosing function: the values it returns
        self.returns: List[List[Value]] = []
        # module-level functions and classes, visible from function bodies
        self.definitions: Dict[str, Value] = {}
        # value id -> how many times a name holding it was read; name or dotted key -> the
        # number of training events (see Event) logged before its last read
        self.reads: Dict[int, int] = {}
        self.last_read: Dict[str, int] = {}
        # ids of tensors on which retain_grad() was called
        self.retained: set = set()
        # id of a tensor whose element count is known (shapes.py) -> (the `return` statement that
        # returned it first, the function it returned from, the model's ``here()`` there)
        self.numel_returns: Dict[int, Tuple[Any, Any]] = {}
        self._inlining = False
        self.loops: List[Loop] = []
        # backward/step/zero_grad calls in walk order (see Event)
        self.events: List[Event] = []
        # ids of op outputs whose backward reads saved tensors; ids of graph values that a
        # backward() without retain_graph has freed
        self.savers: set = set()
        # savers the model only assumes hold a graph: outputs of a module whose parameters it does
        # not know and whose forward it could not follow (modulecalls.py)
        self.probable_savers: set = set()
        # saver id -> the statement that made it; freed saver id -> (the backward() call that
        # freed it, its statement)
        self.saver_stmt: Dict[int, Any] = {}
        # the statements of the frames a saver was made under, outermost first (the call sites of
        # the walked functions, then the statement itself): a rule reports in the frame it needs
        self.saver_chain: Dict[int, Tuple[Any, ...]] = {}
        self.freed_by: Dict[int, Tuple[Any, Any]] = {}
        # freed saver id -> the statements of the frames the freeing backward() ran under (as
        # saver_chain); saver id -> what the saver depends on (to find where a loss consumes a part)
        self.freed_chain: Dict[int, Tuple[Any, ...]] = {}
        self.saver_deps: Dict[int, Any] = {}
        self.saver_seq: Dict[int, int] = {}  # saver id -> how many training events came before it
        # op output id -> the trainable layer weights it saved, each with its layer's key per
        # frame (weights.py)
        self.weight_saves: Dict[int, List[Tuple[Any, Dict[int, str]]]] = {}
        self.retaining: set = set()  # ids of the backward()/autograd.grad calls that keep the graph
        # keys (names) on which backward() was called
        self.backwarded_keys: set = set()
        self.backwarded_in: set = set()  # (walk root, key): where, for a local name
        # inside torch.inference_mode() (grad_enabled is False there too)
        self.inference = False
        # classes whose definition the walk has reached
        self.walked_classes: set = set()
        # what the `__init__` walked at a construction bound on self, by attribute (calls._construct)
        self.init_attrs: Optional[Dict[str, Value]] = None
        self.init_self: Optional[Value] = None  # what `self` held at the end of that `__init__`
        self.frozen_inits: Dict[str, Optional[Value]] = {}  # the same, at the class's definition
        # what such an `__init__` that left `self` (or a part of it) frozen bound on it (freezing.py)
        self.frozen_init_parts: Dict[str, Dict[str, Value]] = {}
        # id of a tensor made by an operation with one input that requires grad -> that input's id
        self.sole_source: Dict[int, int] = {}
        self.eval_ids: set = set()  # modules put in eval mode before any name held them (modes.py)
        # id of a tensor computed in a call's own grad mode (its caller's) -> that call's frame
        self.assumed_made: Dict[int, int] = {}
        # in a function walked at a call made with grad off (no_grad, set_grad_enabled(False)):
        # the outermost such call, where the graph is lost for what the callee computes
        self.grad_off_site: Any = None
        # the dtype of `torch.randn(3)`; None when the file changes it (torch.set_default_dtype)
        self.default_dtype: Optional[str] = "float32"
        # inside `with pytest.raises(...)` / `self.assertRaises(...)`: errors are expected there
        self.expecting_error = False
        self.freed_stack: List[Any] = []
        # ids of tensors a custom Function's forward marked dirty (ctx.mark_dirty)
        self.dirty: set = set()
        # id of an input of a custom Function's forward -> (that forward, the input's position)
        self.fn_inputs: Dict[int, Tuple[Any, int]] = {}
        self._memo: Dict[int, Value] = {}
        # log-probabilities and subtractions (scores.py): value id -> where the log-probability
        # came from; value id -> (the value subtracted from, the value subtracted)
        self.log_probs: Dict[int, Any] = {}
        self.differences: Dict[int, Tuple[Value, Value]] = {}
        self.score_values: Dict[int, Value] = {}
        # calls of this file's functions being walked with their arguments (see calls.py), the
        # walker's entry for doing so, and how many such walks this file may still make
        self.inline_stack: List[Any] = []
        self.call_statements: List[Any] = []  # the call site of each walked function, outermost first
        # per walked or inlined call: (the function, parameter -> the literal True/False/None the
        # call passes to it or leaves it at: syntax.literal_arguments)
        self.inline_literals: List[Tuple[Any, Dict[str, str]]] = []
        # per walked call: parameter (and the receiver's name) -> the caller's key for it
        # (True for a one-expression function evaluated in the caller's frame)
        self.frame_keys: List[Tuple[bool, Dict[str, Optional[str]]]] = []
        self.pending_owner: Optional[str] = None  # a module's forward about to run: its caller's key
        self._rebound: Dict[int, set] = {}  # id of a function walked at a call -> the names it rebinds
        self.once_depth = 0  # inside loops whose body runs on an enclosing loop's first pass only
        self.walk_callee: Optional[Callable[..., Optional[Value]]] = None
        self.inline_budget = INLINE_BUDGET
        # from the pass over the file's definitions before the walk: functions by name, and per
        # class its node, methods, base names; per class the attributes its methods bind
        self.functions: Dict[str, Any] = {}
        self.classes: Dict[str, Any] = {}
        self.method_class: Dict[int, Any] = {}
        self.class_tables: Dict[str, Dict[str, Value]] = {}
        # (class name, attribute) of the buffers a class registers (`self.register_buffer("mean", ...)`)
        self.buffer_names: set = set()
        # keys of modules (or parameters) the code froze -> the functions (by id; 0: module level)
        # whose walk froze them: a local name is frozen in its own function only, `self.*` in
        # every method
        self.frozen_keys: Dict[str, set] = {}
        self.freezes: List[str] = []  # the keys, in the order the walk froze them (also again)
        # id of a torch.nn layer's value -> (that value, {attribute: its parameter}): `m.weight`
        # is the same tensor at every read of the same module
        self.layer_params: Dict[int, Tuple[Value, Dict[str, Value]]] = {}
        # the tests of the enclosing `if` statements whose body is being walked
        self.conditions: List[Any] = []
        # markers (events.Branch) of the other branches being walked: else, except, case, and
        # the statements after an `if` whose body ends the block (``if x: continue``)
        self.branches: List[Any] = []
        # id of a loop node -> the statement count (tick) when its walk ended
        self.loop_exit_seq: Dict[int, int] = {}
        # a count of the statements walked, and per name the count at its last read
        self.tick = 0
        # walking a loop body a second time (the second iteration): training events are not
        # logged again, and rules that judge graph freeing leave it to the first pass
        self.repeat = False
        # during that walk: id of a value the back edge carried -> the statement that bound it;
        # key -> the statement that last bound it
        self.carried: Dict[int, Any] = {}
        self.bound_stmt: Dict[str, Any] = {}
        self.last_read_tick: Dict[str, int] = {}
        # value id -> (events logged, statement count) at the last read of that very object
        self.value_reads: Dict[int, Tuple[int, int]] = {}
        # one id per walk of a function body (its definition, each call walked) and the module:
        # (frame, name) -> (events logged, statement count) at the last read of the name there
        self.frames: List[int] = [0]
        self.frame_count = 0
        self.frame_reads: Dict[Tuple[int, str], Tuple[int, int]] = {}
        # (id of an instance of a class of the file, attribute chain) -> the same, at the last
        # read of that attribute of that object by any name (`self.best` in each method's walk)
        self.object_reads: Dict[Tuple[int, str], Tuple[int, int]] = {}
        # ids of values carried over a loop's back edge that the second pass read
        self.carried_reads: set = set()
        self.loop_first_reads: Dict[int, set] = {}
        # id of a loop node -> the frames whose walk entered it (its function's walks, `frames`)
        self.loop_frames: Dict[int, set] = {}
        # ids of manual-update statements (`w = w - lr * w.grad`) whose result was made a leaf again
        self.releafed: set = set()
        # (forward of a class of the file, grad mode, input shapes) -> what its walk returned
        self.forward_memo: Dict[Any, Value] = {}
        self.carried_cache: Dict[int, Any] = {}  # forward -> the attributes it carries (loops.carried_attributes)
        self.binds_cache: Dict[int, bool] = {}  # method -> binds attributes of self (objects.binds_own_attributes)
        # the same key -> (id, what) of each tensor made before that walk that it saved for backward
        self.forward_saves: Dict[Any, List[Tuple[int, str]]] = {}
        # the same key -> (argument position, node, op) of each in-place write that walk made
        # to one of its inputs (or a view of one): the same call again writes the new argument
        self.forward_writes: Dict[Any, List[Tuple[int, Any, str]]] = {}
        # the same key -> (argument position, what) of each input that walk saved for backward
        # (a LayerNorm first in a layer of the forward): the same call again saves the new argument
        self.forward_input_saves: Dict[Any, List[Tuple[int, str]]] = {}
        # every in-place write, in walk order: (node, value, op)
        self.inplace_log: List[Tuple[Any, Any, str]] = []
        # id of a tensor (not a parameter) -> events logged when its name was bound to something else
        self.leaf_rebinds: Dict[int, int] = {}
        self.param_owner: Dict[int, str] = {}
        # id of a tensor's value after `.requires_grad = flag` / `.requires_grad_()` changed it in
        # place -> the id of its first value (the same Python object: its `.grad` stays)
        self.first_value: Dict[int, int] = {}
        self._emit = emit
        self._dotted_keys = 0
        # the project's other modules (imports.py): the index as this file sees it (None: text
        # with no file), the scope of this file and of each module met, each function of another
        # module -> its module's scope, and the calls in this file through which the walk is in
        # another module's code now
        self.project: Any = None
        self.root_scope = ModuleScope(None, root=True)
        self.root_scope.imports, self.root_scope.definitions = self.imports, self.definitions
        self.scope = self.root_scope
        self.scopes: Dict[str, ModuleScope] = {}
        self.fn_scope: Dict[int, ModuleScope] = {}
        self.foreign_functions: List[Any] = []
        self.call_sites: List[Any] = []
        self.imported: set = set()  # modules whose import-time effects were applied (imports.py)

    # ------------------------------------------------------------------ queries for rules
    def grad_lost_site(self) -> Any:
        """Where a value computed now without a graph lost it: the statement, or, in a function
        walked at a call made with grad off, that call."""
        if self.grad_enabled is False and self.grad_off_site is not None:
            return self.grad_off_site
        return self.current_statement

    def qualname(self, node: cst.BaseExpression) -> Optional[str]:
        return canonical(self.imports.qualname(node))

    def value_of(self, node: cst.BaseExpression) -> Value:
        v = self._memo.get(id(node))
        if v is None:
            v = self.scored(node, self._eval(node))
            self._memo[id(node)] = v
        return v
