# Owner(s): ["module: dynamo"]
# flake8: noqa: F403
"""
Mutating an nn.Module attribute from inside a HigherOrderOp body: this
project's broad suite of the graph-break era (2.11 and later), beside the
pull request's test_hop_mutation.py, whose tests it does not repeat (2.11
and 2.12, which do not run that file, have them in
test_hop_mutation_both_modes.py).

The body of a HigherOrderOp is traced into a subgraph that cannot carry side
effects on its enclosing scope, so Dynamo refuses to set or delete an
attribute of a module that lives outside the body. Whatever form the mutation
takes, it must be refused with one graph break, "nn.Module mutation in
HigherOrderOp", that names the attribute, the module's class and the
HigherOrderOp (https://github.com/pytorch/pytorch/issues/126355), and
everything Dynamo accepts today must keep behaving like eager.
"""

from hypothesis import given, settings, strategies as st
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
)

try:
    from ._hop_mutation_test_utils import *
except ImportError:
    from _hop_mutation_test_utils import *


@torch.compiler.nested_compile_region
def _call_body_in_region(body, x):
    return body(x)


def _nested_compile_region(body, x):
    return _call_body_in_region(body, x)


# invoke_subgraph, whose body may have side effects on purpose.
HOPS["nested_compile_region"] = _nested_compile_region


class HopModuleMutationErrorTests(HopMutationTestCase):
    """One graph break that says what was mutated, and where."""

    @parametrize("hop,mutation,target", CASES)
    def test_mutation_breaks(self, hop, mutation, target):
        model = Model(hop, mutation, target)
        before = module_state(model)
        error = compile_error(model, make_input(hop))
        self.assertModuleMutationBreak(error, hop, mutation, target)
        self.assertEqual(module_state(model), before)

    @parametrize("hop,mutation", STATE_CASES)
    def test_state_mutation_breaks(self, hop, mutation):
        # nn.Module's methods, its containers and its own dicts change its
        # state too: the same break, naming what changed.
        model = StateModel(hop, mutation)
        before = state_of(model)
        error = compile_error(model, make_input(hop))
        self.assertStateMutationBreak(error, hop, mutation)
        self.assertEqual(state_of(model), before)

    def test_global_module_mutation_breaks(self):
        error = compile_error(mutates_global_leaf("wrap"), make_input("wrap"))
        self.assertModuleMutationBreak(error, "wrap", "rebind_int", "submodule")
        self.assertEqual(GLOBAL_LEAF.n, 0)

    @parametrize("mutation", ("rebind_tensor", "rebind_int", "new_submodule"))
    def test_static_module_mutation_breaks(self, mutation):
        # A module Dynamo does not inline is an NNModuleVariable, refused by
        # the setattr builtin rather than by SideEffects.
        make_model = functools.partial(static_model, "cond", mutation)
        error = compile_error(make_model(), make_input("cond"))
        self.assertModuleMutationBreak(error, "cond", mutation, "self")
        self.assertFallbackMatchesEager(make_model, make_input("cond"))

    @parametrize(
        "hop,mutation",
        (
            ("autograd_function", "iadd_tensor"),
            ("nested_compile_region", "iadd_buffer"),
        ),
    )
    @parametrize("target", ("self", "linear"))
    def test_aliased_result_breaks(self, hop, mutation, target):
        # `m.w += 1` stores back a result that aliases m.w, which an
        # autograd.Function forward and a nested_compile_region body
        # (invoke_subgraph) filter out of their subgraph's outputs. This was
        # an InternalTorchDynamoError, which fullgraph=False did not fall back
        # from either.
        make_model = functools.partial(Model, hop, mutation, target)
        x = make_input(hop)
        error = compile_error(make_model(), x)
        self.assertIsInstance(error, Unsupported)
        self.assertEqual(graph_break(error)[0], ALIASED_GB_TYPE)
        self.assertFallbackMatchesEager(make_model, x)

    def test_outer_plain_object_new_attribute_generic_break(self):
        self.assertOuterPlainObjectNewAttributeBreaks("wrap")

    @settings(max_examples=8, deadline=None)
    @given(
        outer=st.lists(st.sampled_from(("wrap", "cond")), min_size=1, max_size=2),
        case=st.sampled_from([c for c in CASES if not untraced_at_root(c[1])]),
    )
    def test_innermost_hop_is_named(self, outer, case):
        hop, mutation, target = case
        self.assertBreakNamesInnermostHop(outer, hop, mutation, target)


class HopModuleMutationControlTests(HopMutationTestCase):
    """What already works keeps working."""

    @parametrize("hop,mutation,target", CASES)
    def test_fallback_matches_eager(self, hop, mutation, target):
        self.assertFallbackMatchesEager(
            lambda: Model(hop, mutation, target), make_input(hop)
        )

    @parametrize("mutation", MUTATIONS)
    def test_mutation_at_root_compiles(self, mutation):
        self.assertFullgraphMatchesEager(
            lambda: Root("wrap", mutation, "submodule"), torch.randn(3, 2)
        )

    @parametrize("hop,mutation", STATE_CASES)
    def test_state_mutation_fallback_matches_eager(self, hop, mutation):
        self.assertFallbackMatchesEager(
            lambda: StateModel(hop, mutation), make_input(hop), state_of
        )

    @parametrize("mutation", STATE_MUTATIONS)
    def test_state_mutation_at_root_compiles(self, mutation):
        self.assertFullgraphMatchesEager(
            lambda: StateModel("root", mutation), torch.randn(3, 2), state_of
        )

    @parametrize("hop", ("autograd_function", "nested_compile_region"))
    @parametrize(
        "mutation",
        (
            "register_buffer",
            "module_list_append",
            "dunder_dict_setitem",
            "buffers_setitem",
        ),
    )
    def test_state_mutation_where_side_effects_are_allowed(self, hop, mutation):
        # These HigherOrderOps allow side effects: their bodies may change an
        # outer module's state as today.
        self.assertFullgraphMatchesEager(
            lambda: StateModel(hop, mutation), make_input(hop), state_of
        )

    @parametrize("mutation", ("rebind_tensor", "rebind_buffer", "new_attribute"))
    def test_autograd_function_forward_compiles(self, mutation):
        # An autograd.Function forward may mutate outer modules today.
        self.assertFullgraphMatchesEager(
            lambda: Model("autograd_function", mutation, "submodule"),
            make_input("autograd_function"),
        )

    @parametrize(
        "mutation", ("rebind_tensor", "rebind_buffer", "rebind_int", "delete_attribute")
    )
    def test_nested_compile_region_compiles(self, mutation):
        # invoke_subgraph allows side effects: a nested_compile_region body
        # may mutate outer modules today.
        self.assertFullgraphMatchesEager(
            lambda: Model("nested_compile_region", mutation, "submodule"),
            make_input("nested_compile_region"),
        )

    def test_static_module_mutation_in_autograd_function_breaks(self):
        # An autograd.Function forward may mutate an inlined module, not one
        # that is installed in the graph as it is.
        make_model = functools.partial(
            static_model, "autograd_function", "rebind_tensor"
        )
        x = make_input("autograd_function")
        self.assertEqual(graph_break(compile_error(make_model(), x))[0], GB_TYPE)
        self.assertFallbackMatchesEager(make_model, x)

    @parametrize("hop", ("map", "cond"))
    def test_nullified_mutation_compiles(self, hop):
        # A flag set and restored inside the body leaves no side effect.
        self.assertFullgraphMatchesEager(lambda: Flips(hop, "linear"), make_input(hop))

    @parametrize("transform", ("vmap", "grad"))
    def test_functorch_transform_body_can_mutate(self, transform):
        # torch.func transforms are inlined at the root tracer, not traced
        # into a subgraph, so their bodies may mutate outer modules.
        self.assertFullgraphMatchesEager(
            lambda: Transformed(transform), torch.randn(3, 2)
        )

    def test_autograd_function_ctx_side_effects(self):
        class SavesOnCtx(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.scale = 2
                ctx.save_for_backward(x)
                return x * ctx.scale

            @staticmethod
            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                return grad * ctx.scale

        x = torch.randn(3, requires_grad=True)
        fn = torch.compile(SavesOnCtx.apply, backend="eager", fullgraph=True)
        self.assertEqual(fn(x), SavesOnCtx.apply(x))

    def test_outer_plain_object_keeps_generic_breaks(self):
        self.assertOuterPlainObjectKeepsGenericBreaks("wrap")

    def test_graph_breaks_are_in_the_registry(self):
        # The installed graph_break_registry.json documents the breaks this
        # file expects, as they are raised.
        for hop, mutation in (("cond", "iadd_tensor"), ("wrap", "rebind_int")):
            self.assertBreakMatchesRegistry(hop, mutation)


instantiate_parametrized_tests(HopModuleMutationErrorTests)
instantiate_parametrized_tests(HopModuleMutationControlTests)


if __name__ == "__main__":
    from torch._dynamo.test_case import run_tests

    run_tests()
