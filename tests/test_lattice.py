"""The joins of the model (gradlint/model/lattice.py): must view in the fields, may view in
the alternatives; unknown absorbs only what it must."""

from gradlint.model.lattice import (
    alternatives, ids_of, join_branch_values, join_envs, must_deps, tensor_view,
)
from gradlint.model.values import CONST_VALUE, SCALAR, TENSOR, UNKNOWN, UNKNOWN_VALUE, Value, leaf_rg, plain_tensor


def test_same_object_is_kept():
    v = leaf_rg()
    assert join_branch_values([v, v]) is v


def test_leaf_on_every_path_is_a_leaf():
    a, b = leaf_rg(), leaf_rg()
    j = join_branch_values([a, b])
    assert j.leaf_requiring_grad and set(alternatives(j)) == {a, b}
    assert ids_of(j) == {j.id, a.id, b.id}


def test_leaf_on_one_path_only_is_not_a_must_fact():
    a, b = leaf_rg(), plain_tensor()
    j = join_branch_values([a, b])
    assert j.kind == TENSOR and j.rg is None and not j.leaf_requiring_grad
    assert any(x.leaf_requiring_grad for x in alternatives(j))  # the may view keeps it


def test_deps_may_and_must():
    w = leaf_rg()
    x = Value(TENSOR, rg=True, leaf=False, deps=w.deps)
    y = Value(TENSOR, rg=True, leaf=False, deps=w.deps)
    j = join_branch_values([x, y])
    assert {x.id, y.id, w.id} <= j.deps  # may depend on either
    assert w.id in must_deps(j) and x.id not in must_deps(j) and y.id not in must_deps(j)


def test_number_or_tensor_computes_as_the_tensor():
    t = leaf_rg()
    j = join_branch_values([Value(SCALAR), t])
    assert j.kind == UNKNOWN and tensor_view(j).leaf_requiring_grad


def test_unknown_absorbs_the_must_view_only():
    t = leaf_rg()
    j = join_branch_values([UNKNOWN_VALUE, t])
    assert j.kind == UNKNOWN and tensor_view(j) is j and t in alternatives(j)


def test_unbound_on_a_path_is_dropped():
    assert join_envs([{"x": leaf_rg()}, {}]) == {}
    assert join_envs([{"x": CONST_VALUE}, {"x": CONST_VALUE}])["x"] is CONST_VALUE
