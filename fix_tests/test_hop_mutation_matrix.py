# Owner(s): ["module: dynamo"]
"""
The extended suite of test_hop_mutation_graph_break.py: every form of the
mutation, in every HigherOrderOp, on every kind of target module, refused
patched and behaving like eager with fullgraph=False. This project runs it on
every release of the graph-break era; the pull request carries the small
test_hop_mutation.py.
"""

import functools

import torch
import torch._dynamo.test_case
from hypothesis import given, settings, strategies as st
from test_hop_mutation_graph_break import (
    ALIASED_GB_TYPE,
    ALIASED_RESULT,
    GB_TYPE,
    GLOBAL_LEAF,
    HOPS,
    MUTATIONS,
    REFUSING_HOPS,
    STATIC_MUTATIONS,
    TARGETS,
    CreatesInBody,
    Flips,
    HopMutationTestCase,
    Model,
    Root,
    compile_error,
    graph_break,
    make_input,
    mutates_global_leaf,
    static_model,
)
from torch._dynamo.exc import Unsupported
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
)


class HopModuleMutationErrorTests(HopMutationTestCase):
    """The fix, for every case: one graph break that says what was mutated,
    and where. Every test here fails without the fix."""

    @parametrize("target", TARGETS)
    @parametrize("mutation", MUTATIONS)
    @parametrize("hop", REFUSING_HOPS)
    def test_mutation_breaks(self, hop, mutation, target):
        error = compile_error(Model(hop, mutation, target), make_input(hop))
        self.assertModuleMutationBreak(error, hop, mutation, target)

    @parametrize("hop", REFUSING_HOPS)
    def test_global_module_mutation_breaks(self, hop):
        # A module reached through a global rather than through self.
        error = compile_error(mutates_global_leaf(hop), make_input(hop))
        self.assertModuleMutationBreak(error, hop, "rebind_int", "submodule")
        self.assertEqual(GLOBAL_LEAF.n, 0)

    @parametrize("mutation", STATIC_MUTATIONS)
    @parametrize("hop", ("wrap", "cond"))
    def test_static_module_mutation_breaks(self, hop, mutation):
        # A module Dynamo does not inline is an NNModuleVariable, refused by
        # the setattr builtin rather than by SideEffects.
        make_model = functools.partial(static_model, hop, mutation)
        error = compile_error(make_model(), make_input(hop))
        self.assertModuleMutationBreak(error, hop, mutation, "self")
        self.assertFallbackMatchesEager(make_model, make_input(hop))

    @parametrize("target", TARGETS)
    @parametrize("mutation", ALIASED_RESULT)
    def test_autograd_function_aliased_result_breaks(self, mutation, target):
        # Was an InternalTorchDynamoError, with fullgraph=False too.
        error = compile_error(
            Model("autograd_function", mutation, target),
            make_input("autograd_function"),
        )
        self.assertIsInstance(error, Unsupported)
        self.assertEqual(graph_break(error)[0], ALIASED_GB_TYPE)

    @parametrize("target", TARGETS)
    @parametrize("mutation", ALIASED_RESULT)
    def test_autograd_function_aliased_result_fallback_matches_eager(
        self, mutation, target
    ):
        self.assertFallbackMatchesEager(
            lambda: Model("autograd_function", mutation, target),
            make_input("autograd_function"),
        )

    @parametrize("hop", REFUSING_HOPS)
    def test_outer_plain_object_new_attribute_generic_break(self, hop):
        self.assertOuterPlainObjectNewAttributeBreaks(hop)

    @settings(max_examples=25, deadline=None)
    @given(
        outer=st.lists(st.sampled_from(("wrap", "cond", "checkpoint")), max_size=2),
        hop=st.sampled_from(REFUSING_HOPS),
        mutation=st.sampled_from(sorted(MUTATIONS)),
        target=st.sampled_from(TARGETS),
    )
    def test_innermost_hop_is_named_property(self, outer, hop, mutation, target):
        self.assertBreakNamesInnermostHop(outer, hop, mutation, target)


class HopModuleMutationControlTests(HopMutationTestCase):
    """What already works keeps working, for every case."""

    @parametrize("target", TARGETS)
    @parametrize("mutation", MUTATIONS)
    @parametrize("hop", REFUSING_HOPS)
    def test_fallback_matches_eager(self, hop, mutation, target):
        self.assertFallbackMatchesEager(
            lambda: Model(hop, mutation, target), make_input(hop)
        )

    @parametrize("target", TARGETS)
    @parametrize("mutation", [m for m in MUTATIONS if m not in ALIASED_RESULT])
    def test_autograd_function_forward_compiles(self, mutation, target):
        # An autograd.Function forward may mutate outer modules today.
        self.assertFullgraphMatchesEager(
            lambda: Model("autograd_function", mutation, target),
            make_input("autograd_function"),
        )

    @parametrize("mutation", STATIC_MUTATIONS)
    def test_static_module_mutation_in_autograd_function_breaks(self, mutation):
        # An autograd.Function forward may mutate an inlined module, not one
        # that is installed in the graph as it is.
        make_model = functools.partial(static_model, "autograd_function", mutation)
        x = make_input("autograd_function")
        self.assertEqual(graph_break(compile_error(make_model(), x))[0], GB_TYPE)
        self.assertFallbackMatchesEager(make_model, x)

    @parametrize("target", TARGETS)
    @parametrize("mutation", MUTATIONS)
    def test_checkpoint_side_effects_allowed_by_config(self, mutation, target):
        with torch._dynamo.config.patch(
            skip_fwd_side_effects_in_bwd_under_checkpoint=True
        ):
            self.assertFullgraphMatchesEager(
                lambda: Model("checkpoint", mutation, target), make_input("checkpoint")
            )

    @parametrize("target", TARGETS)
    @parametrize("mutation", MUTATIONS)
    def test_mutation_at_root_compiles(self, mutation, target):
        self.assertFullgraphMatchesEager(
            lambda: Root("wrap", mutation, target), torch.randn(3, 2)
        )

    @parametrize("target", TARGETS)
    @parametrize("hop", REFUSING_HOPS)
    def test_nullified_mutation_compiles(self, hop, target):
        self.assertFullgraphMatchesEager(lambda: Flips(hop, target), make_input(hop))

    @parametrize("hop", HOPS)
    def test_module_created_in_body_can_be_mutated(self, hop):
        self.assertFullgraphMatchesEager(lambda: CreatesInBody(hop), make_input(hop))

    @parametrize("hop", REFUSING_HOPS)
    def test_outer_plain_object_keeps_generic_breaks(self, hop):
        self.assertOuterPlainObjectKeepsGenericBreaks(hop)

    @parametrize("hop", REFUSING_HOPS)
    def test_graph_breaks_are_in_the_registry(self, hop):
        # The installed graph_break_registry.json documents the breaks this
        # file expects, as they are raised.
        for mutation in ("iadd_tensor", "rebind_int"):
            self.assertBreakMatchesRegistry(hop, mutation)


instantiate_parametrized_tests(HopModuleMutationErrorTests)
instantiate_parametrized_tests(HopModuleMutationControlTests)


if __name__ == "__main__":
    from torch._dynamo.test_case import run_tests

    run_tests()
