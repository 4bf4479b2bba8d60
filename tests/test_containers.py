"""Containers as values (gradlint/model/containers.py): elements by constant key or index, the
join of all elements for a key the model does not know, the summary, the cap, and the model
reading them in code."""

import libcst as cst

from gradlint.model import containers as c
from gradlint.model.lattice import join_branch_values
from gradlint.model.values import MODULE, UNKNOWN_VALUE, Value, leaf_rg, plain_tensor

NO_KEY = c.const_key(cst.parse_expression("k"))


def test_dict_reads_by_constant_key():
    w, b = leaf_rg(), plain_tensor()
    d = c.store(c.store(c.make((), keys=()), "w", w), "b", b)
    assert c.read(d, "w") is w and c.read(d, "b") is b
    assert c.read(d, "missing") is UNKNOWN_VALUE


def test_a_read_by_an_unknown_key_is_what_every_element_agrees_on():
    w1, w2 = leaf_rg(), leaf_rg()
    both = c.make((w1, w2), keys=("a", "b"))
    assert c.read(both, NO_KEY).leaf_requiring_grad  # must: every element is a leaf requiring grad
    mixed = c.make((w1, plain_tensor()), keys=("a", "b"))
    assert not c.read(mixed, NO_KEY).leaf_requiring_grad  # may only: rules stay quiet


def test_a_store_under_an_unknown_key_joins_every_constant_read():
    w = leaf_rg()
    d = c.store(c.make((w,), keys=("w",)), NO_KEY, plain_tensor())
    assert not c.read(d, "w").leaf_requiring_grad  # "w" may have been overwritten


def test_defaultdict_list_reads_an_empty_list_then_the_appended_one():
    d = c.make((), keys=(), made=c.DEFAULT_LIST)
    empty = c.read(d, "loss")
    assert empty.kind == "tuple" and empty.items == ()
    t = leaf_rg()
    d = c.store(d, "loss", c.added(empty, t, "append"))
    assert c.read(d, "loss").items == (t,)


def test_list_index_and_variable_index():
    a, b = leaf_rg(), leaf_rg()
    xs = c.make((a, b))
    assert c.read(xs, 0) is a and c.read(xs, -1) is b
    assert c.read(xs, NO_KEY).leaf_requiring_grad


def test_cap_keeps_only_the_summary():
    w = leaf_rg()
    many = c.make([w] * (c.MAX_ITEMS + 5))  # (a list appended to on every iteration of a loop)
    assert many.items == (w,) and many.made == "joined"
    distinct = c.make(leaf_rg() for _ in range(2 * c.MAX_ITEMS))
    assert distinct.items == (UNKNOWN_VALUE,)  # too many to join cheaply: unknown


def test_dicts_join_by_key():
    w = leaf_rg()
    one = c.make((w,), keys=("w",))
    other = c.make((w, plain_tensor()), keys=("w", "b"))
    j = join_branch_values([one, other])
    assert j.keys == ("w", "b") and c.read(j, "w") is w


def test_module_containers_keep_their_layers():
    sig = Value(MODULE, params=False, act="sigmoid", node="Sigmoid")
    comp = Value("tuple", items=(sig,), made="comp")
    call = cst.parse_expression("nn.ModuleList([nn.Sigmoid() for _ in range(3)])")
    layers = c.module_layers("torch.nn.ModuleList", call, [comp])
    assert layers is not None and c.module_read(layers, 2) is sig and c.module_read(layers, NO_KEY) is sig


def test_lint_finds_a_leaf_updated_in_place_through_a_dict(tmp_path):
    import subprocess
    import sys

    src = tmp_path / "m.py"
    src.write_text(
        "import torch\n"
        "params = {'w': torch.ones(3, requires_grad=True)}\n"
        "for name in params:\n"
        "    params[name] += 1\n"
    )
    out = subprocess.run([sys.executable, "-m", "gradlint", "check", str(src), "--no-cache", "-j", "1", "-q"],
                         capture_output=True, text=True)
    assert ":4:5: GL101" in out.stdout, out.stdout + out.stderr
