# Owner(s): ["module: dynamo"]
"""
test_hop_mutation_graph_break.py for the releases of the graph-break era before 2.13:
the fix's graph break, and the controls as their Dynamo behaves, in both
modes on 2.11 (whose inline_inbuilt_nn_modules still switches one) and
with inlining on, the only mode, on 2.12.

With inlining off every module is an NNModuleVariable, which Dynamo installs
in the graph as it is: it refuses any mutation of one inside a HigherOrderOp
body (an autograd.Function forward, a nested_compile_region, from which
2.11 does not fall back to eager either, and checkpoint under
skip_fwd_side_effects_in_bwd_under_checkpoint included), and supports
neither del, object.__setattr__ nor eval() on one, even at the root. Both
predate what three tests of test_hop_mutation_graph_break.py check: undoing a constant
mutation inside the body (the nullified-mutation rule), the taint of an
aliased intermediate that makes `self.w += 1` in an autograd.Function
forward a graph break (2.11 compiles it like eager; 2.12 leaked the
intermediate into code that raised NameError when it ran, as 2.11 does in a
nested_compile_region, and both series carry the taint), and a plain
object's new attribute failing with
the repr of an AttributeError (both give "HOP: Unsafe side effect" for every
outer plain object). Those tests are left out, and the ones below check what
this Dynamo does instead.
"""

import functools

import test_hop_mutation_graph_break as base
import torch
from test_hop_mutation_graph_break import (
    ALIASED_GB_TYPE,
    ALIASED_RESULT,
    CASES,
    GB_TYPE,
    HOPS,
    MUTATIONS,
    REFUSING_HOPS,
    STATE_CASES,
    STATE_MUTATIONS,
    STATIC_MUTATIONS,
    UNTRACED_GB_TYPES,
    CreatesInBody,
    Flips,
    Issue126355,
    Model,
    Root,
    StateModel,
    class_name,
    compile_error,
    expected_module_explanation,
    graph_break,
    make_input,
    module_state,
    run,
    state_of,
    untraced_at_root,
)
from torch._dynamo.exc import UncapturedHigherOrderOpError
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
)

# What an NNModuleVariable supports at the root.
STATIC_ROOT_MUTATIONS = tuple(m for m in STATIC_MUTATIONS if m != "eval")


# An in-place result stored back from an autograd.Function forward compiles
# like eager before 2.12; from 2.12 it aliases a filtered intermediate.
ALIASED_COMPILES = torch.__version__ < (2, 12)

# What an autograd.Function forward may do to an inlined module and compile
# like eager.
FORWARD_MUTATIONS = ("rebind_tensor", "rebind_buffer", "new_attribute") + (
    ALIASED_RESULT if ALIASED_COMPILES else ()
)


def inlined():
    # From 2.12 the flag is deprecated (reading it warns) and always True.
    return (
        torch.__version__ >= (2, 12) or torch._dynamo.config.inline_inbuilt_nn_modules
    )


def assertNoFallback(test, model_fn, x):
    # 2.11's invoke_subgraph does not fall back to eager from a break in its
    # body (as map and cond do not): fullgraph=False raises too.
    compiled = run(torch.compile(model_fn(), backend="eager"), x)
    test.assertEqual(compiled[:2], ("raises", UncapturedHigherOrderOpError))


def leave_out(cls, *tests):
    """Leaves out the tests cls inherits that tests names: each a test's name
    or the name of a parametrized test, whose variants are name_<param>_...
    A name that matches no test fails at import: a renamed test is not left
    in by accident."""
    for test in tests:
        names = [n for n in dir(cls) if n == test or n.startswith(f"{test}_")]
        if not names:
            raise AssertionError(f"leave_out: {cls.__name__} has no test {test!r}")
        for name in names:
            setattr(cls, name, None)
    return cls


# The tests of this file, mixed into test_hop_mutation_graph_break.py's classes below
# (instantiate_parametrized_tests would parametrize those classes' tests
# again if these were defined on subclasses of them). The first of each
# class are the pull request's tests in this project's terms: from 2.13 on
# test_hop_mutation.py runs them, and these releases do not run it.
class ErrorTestsOfThisRelease:
    def test_map_side_effects_message(self):
        # The reproducer of #126355.
        error = compile_error(Issue126355(), torch.randn(3, 2))
        self.assertIsInstance(error, UncapturedHigherOrderOpError)
        self.assertExpectedInline(
            "\n".join(graph_break(error)),
            """\
nn.Module mutation in HigherOrderOp
Attempted to set attribute 'w' of nn.Module Issue126355, which was created outside of this HigherOrderOp's body. Dynamo does not support changing the state of such a module in the body of this HigherOrderOp.""",  # noqa: B950
        )

    @parametrize(
        "mutation",
        ("register_buffer", "buffers_setitem", "module_list_append", "train"),
    )
    def test_static_state_mutation_breaks(self, mutation):
        # A module Dynamo does not inline (an NNModuleVariable) too.
        model = StateModel("cond", mutation)
        model.torchdynamo_force_dynamic = False
        before = state_of(model)
        error = compile_error(model, make_input("cond"))
        self.assertStateMutationBreak(error, "cond", mutation)
        self.assertEqual(state_of(model), before)

    @parametrize("hop", REFUSING_HOPS)
    def test_reproducer_breaks_in_every_hop(self, hop):
        error = compile_error(Model(hop, "iadd_tensor", "self"), make_input(hop))
        self.assertModuleMutationBreak(error, hop, "iadd_tensor", "self")

    @parametrize("hop", ("map", "cond"))
    def test_undone_mutation_breaks(self, hop):
        # No nullified-mutation rule: a flag set and restored inside the
        # body is a mutation of the module like any other.
        error = compile_error(Flips(hop, "linear"), make_input(hop))
        gb_type, explanation = graph_break(error)
        self.assertEqual(gb_type, GB_TYPE, msg=str(error))
        self.assertTrue(
            explanation.startswith(
                expected_module_explanation(hop, "set attribute 'flag' of", "Linear")
            ),
            msg=explanation,
        )

    def test_checkpoint_hint_where_the_flag_helps(self):
        # With inlining off the module is an NNModuleVariable, whose side
        # effects the checkpoint flag does not allow: no hint for it.
        for hop, model, shown in (
            ("checkpoint", Model("checkpoint", "iadd_buffer", "self"), inlined()),
            ("map", Model("map", "iadd_buffer", "self"), False),
            ("checkpoint", base.static_model("checkpoint", "iadd_buffer"), False),
        ):
            self.assertCheckpointHint(hop, model, shown)

    @parametrize("target", ("self", "linear"))
    def test_nested_compile_region_aliased_result(self, target):
        # With inlining off the module is an NNModuleVariable: its store is
        # refused as a module mutation, before any intermediate is filtered.
        make_model = functools.partial(
            Model, "nested_compile_region", "iadd_buffer", target
        )
        x = make_input("nested_compile_region")
        error = compile_error(make_model(), x)
        if inlined():
            self.assertEqual(graph_break(error)[0], ALIASED_GB_TYPE, msg=str(error))
            self.assertFallbackMatchesEager(make_model, x)
        else:
            gb_type, explanation = graph_break(error)
            self.assertEqual(gb_type, GB_TYPE, msg=str(error))
            self.assertTrue(
                explanation.startswith(
                    expected_module_explanation(
                        "nested_compile_region",
                        "set attribute 'buf' of",
                        class_name(target),
                    )
                ),
                msg=explanation,
            )
            self.assertIn("invoke_subgraph", str(error))
            assertNoFallback(self, make_model, x)


# What 2.11 does not trace even at the root (in this process's mode): in a
# HigherOrderOp body it keeps Dynamo's own error.
UNTRACED_CASES = [(h, m, t) for h, m, t in CASES if untraced_at_root(m)]
UNTRACED_STATE_CASES = [(h, m) for h, m in STATE_CASES if untraced_at_root(m)]


class ControlTestsOfThisRelease:
    @parametrize("hop", ("map", "wrap", "autograd_function"))
    def test_module_created_in_body_can_be_mutated(self, hop):
        self.assertFullgraphMatchesEager(lambda: CreatesInBody(hop), make_input(hop))

    def test_untraced_at_root_keeps_dynamos_error(self):
        cases = [(Model(*case), module_state, case[0]) for case in UNTRACED_CASES]
        cases += [
            (StateModel(*case), state_of, case[0]) for case in UNTRACED_STATE_CASES
        ]
        for model, state, hop in cases:
            before = state(model)
            error = compile_error(model, make_input(hop))
            self.assertIn(graph_break(error)[0], UNTRACED_GB_TYPES, msg=str(error))
            self.assertEqual(state(model), before)

    def assertCompilesOrRefusedLikeEager(self, compiles, model_fn, x):
        """Compiles like eager, or (compiles false) is refused with
        fullgraph=True and falls back like eager; returns the refusal."""
        if compiles:
            self.assertFullgraphMatchesEager(model_fn, x)
            return None
        # Whichever graph break it is: on an NNModuleVariable, this Dynamo's.
        error = compile_error(model_fn(), x)
        self.assertFallbackMatchesEager(model_fn, x)
        return error

    @parametrize("mutation", STATE_MUTATIONS)
    def test_state_mutation_at_root(self, mutation):
        # Compiles like eager where this release traces the change at the
        # root, and falls back to eager where it does not: any change with
        # inlining off (an NNModuleVariable), and `del m.__dict__[k]`.
        make_model = functools.partial(StateModel, "root", mutation)
        x = torch.randn(3, 2)
        if inlined() and mutation != "dunder_dict_delitem":
            self.assertFullgraphMatchesEager(make_model, x, state_of)
        else:
            self.assertFallbackMatchesEager(make_model, x, state_of)

    @parametrize("mutation", MUTATIONS)
    def test_mutation_at_root(self, mutation):
        error = self.assertCompilesOrRefusedLikeEager(
            inlined() or mutation in STATIC_ROOT_MUTATIONS,
            lambda: Root("wrap", mutation, "submodule"),
            torch.randn(3, 2),
        )
        if error is not None:
            self.assertNotEqual(graph_break(error)[0], GB_TYPE, msg=str(error))

    @parametrize("mutation", FORWARD_MUTATIONS)
    def test_autograd_function_forward(self, mutation):
        self.assertCompilesOrRefusedLikeEager(
            inlined(),
            lambda: Model("autograd_function", mutation, "submodule"),
            make_input("autograd_function"),
        )

    @parametrize(
        "mutation", ("rebind_tensor", "rebind_buffer", "rebind_int", "delete_attribute")
    )
    def test_nested_compile_region(self, mutation):
        def make_model():
            return Model("nested_compile_region", mutation, "submodule")

        x = make_input("nested_compile_region")
        if inlined():
            self.assertFullgraphMatchesEager(make_model, x)
        else:
            compile_error(make_model(), x)
            assertNoFallback(self, make_model, x)

    @parametrize("mutation", ("iadd_buffer", "rebind_int", "delete_attribute"))
    def test_checkpoint_side_effects_config(self, mutation):
        with torch._dynamo.config.patch(
            skip_fwd_side_effects_in_bwd_under_checkpoint=True
        ):
            self.assertCompilesOrRefusedLikeEager(
                inlined(),
                lambda: Model("checkpoint", mutation, "self"),
                make_input("checkpoint"),
            )

    @parametrize("hop", ("map", "cond", "wrap"))
    def test_outer_plain_object_unsafe_side_effect(self, hop):
        class Config:
            n = 0
            t = torch.zeros(1)

        for value in ("constant", "tensor", "new attribute"):
            config = Config()

            def fn(x, config=config, value=value):
                def body(t):
                    if value == "constant":
                        config.n = 1
                    elif value == "tensor":
                        config.t = t.sum()
                    else:
                        config.fresh = 1
                    return t + 1

                return HOPS[hop](body, x)

            error = compile_error(fn, make_input(hop))
            self.assertEqual(graph_break(error)[0], "HOP: Unsafe side effect")
            self.assertEqual(config.n, 0)
            self.assertFalse(hasattr(config, "fresh"))


instantiate_parametrized_tests(ErrorTestsOfThisRelease)
instantiate_parametrized_tests(ControlTestsOfThisRelease)


class HopModuleMutationErrorTests(
    ErrorTestsOfThisRelease, base.HopModuleMutationErrorTests
):
    """One graph break that says what was mutated, and where, in both modes."""


class HopModuleMutationControlTests(
    ControlTestsOfThisRelease, base.HopModuleMutationControlTests
):
    """What already works keeps working, and what is refused stays refused."""


leave_out(
    HopModuleMutationErrorTests,
    *(
        ("test_aliased_result_breaks_hop_autograd_function",)
        if ALIASED_COMPILES
        else ()
    ),
    "test_outer_plain_object_new_attribute_generic_break",
    "test_aliased_result_breaks_hop_nested_compile_region",
)
# The cases of the base class's error tests that keep Dynamo's own error here
# are checked by test_untraced_at_root_keeps_dynamos_error instead.
leave_out(
    HopModuleMutationErrorTests,
    *(
        f"test_mutation_breaks_hop_{hop}_mutation_{mutation}_target_{target}"
        for hop, mutation, target in UNTRACED_CASES
    ),
    *(
        f"test_state_mutation_breaks_hop_{hop}_mutation_{mutation}"
        for hop, mutation in UNTRACED_STATE_CASES
    ),
)
if not UNTRACED_CASES + UNTRACED_STATE_CASES:  # 2.12 traces them all
    leave_out(
        HopModuleMutationControlTests, "test_untraced_at_root_keeps_dynamos_error"
    )
leave_out(
    HopModuleMutationControlTests,
    "test_state_mutation_at_root_compiles",
    "test_mutation_at_root_compiles",
    "test_autograd_function_forward_compiles",
    "test_nullified_mutation_compiles",
    "test_outer_plain_object_keeps_generic_breaks",
    "test_nested_compile_region_compiles",
)


if __name__ == "__main__":
    from torch._dynamo.test_case import run_tests

    run_tests()
