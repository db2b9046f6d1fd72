# Owner(s): ["module: dynamo"]
# flake8: noqa: F403
"""
Mutating an nn.Module attribute from inside a HigherOrderOp body.

The body of a HigherOrderOp is traced into a subgraph that cannot carry side
effects on its enclosing scope, so Dynamo refuses to set or delete an
attribute of a module that lives outside the body. It must refuse with the
same AttributeMutationError whether or not inbuilt nn modules are inlined
(https://github.com/pytorch/pytorch/issues/126355), and everything it accepts
today must keep behaving like eager.
"""

import re

from hypothesis import given, settings, strategies as st
from torch._dynamo.exc import AttributeMutationError
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
)

try:
    from ._hop_mutation_test_utils import *
except ImportError:
    from _hop_mutation_test_utils import *


MESSAGE_PREFIX = "Can't inplace modify module params/buffers inside HigherOrderOp"

# The HigherOrderOps and forms of the mutation of this era's tests.
HOPS_OF_THIS_ERA = (
    "map",
    "cond",
    "while_loop",
    "wrap",
    "checkpoint",
    "autograd_function",
)
MUTATIONS_OF_THIS_ERA = (
    "iadd_tensor",
    "iadd_buffer",
    "rebind_tensor",
    "rebind_int",
    "new_attribute",
    "builtin_setattr",
    "object_setattr",
    "delete_attribute",
)

# The cases of the error tests, and those this Dynamo does not trace even at
# the root (in this process's inlining mode), which keep Dynamo's own error.
MUTATION_CASES = tuple(
    (hop, mutation, target)
    for hop in HOPS_OF_THIS_ERA
    for mutation in MUTATIONS_OF_THIS_ERA
    for target in TARGETS
)
RAISING_CASES = tuple(c for c in MUTATION_CASES if not untraced_at_root(c[1]))
UNTRACED_CASES = tuple(
    (hop, mutation, "self")
    for hop, mutation in zip(HOPS_OF_THIS_ERA * 2, MUTATIONS_OF_THIS_ERA)
    if untraced_at_root(mutation)
)

# The forms of the mutation that get the fix's error in both inlining modes.
TRACED_IN_BOTH_MODES = tuple(
    m
    for m in MUTATIONS_OF_THIS_ERA
    if not (untraced_at_root(m, inlined=False) or untraced_at_root(m, inlined=True))
)


# Each state mutation once, in this era's refusing HigherOrderOps in turn.
STATE_CASES_OF_THIS_ERA = tuple(
    (HOPS_OF_THIS_ERA[i % 5], mutation) for i, mutation in enumerate(STATE_MUTATIONS)
)
RAISING_STATE_CASES = tuple(
    c for c in STATE_CASES_OF_THIS_ERA if not untraced_at_root(c[1])
)
UNTRACED_STATE_CASES = tuple(
    c for c in STATE_CASES_OF_THIS_ERA if untraced_at_root(c[1])
)


# 2.4 compiles `del module_list[i]` at the root unlike eager (the remaining
# modules keep their old names), with or without the fix: no control there.
ROOT_STATE_MUTATIONS = tuple(
    m
    for m in STATE_MUTATIONS
    if not (
        torch.__version__ < (2, 5)
        and torch._dynamo.config.inline_inbuilt_nn_modules
        and m in ("module_list_delitem", "module_list_pop")
    )
)


def expected_state_message(mutation):
    _, what, class_name = STATE_MUTATIONS[mutation]
    return f"{MESSAGE_PREFIX}: attempted to {what} {class_name}"


def expected_message(mutation, target):
    _, attr, deletes = MUTATIONS[mutation]
    action = "delete" if deletes else "set"
    return (
        f"{MESSAGE_PREFIX}: attempted to {action} attribute '{attr}' "
        f"of {class_name(target)}"
    )


def mutation_error(fn, x, inline):
    """The error fullgraph=True compilation raises, unwrapping the
    UncapturedHigherOrderOpError that map, cond and while_loop raise around
    it (from 2.9 `from None`: the error is then its context, not its cause)."""
    with torch._dynamo.config.patch(inline_inbuilt_nn_modules=inline):
        torch._dynamo.reset()
        try:
            torch.compile(fn, backend="eager", fullgraph=True)(x)
        except UncapturedHigherOrderOpError as e:
            return e.__cause__ or e.__context__
        except Unsupported as e:
            return e
    raise AssertionError("compilation did not raise")


class HopModuleMutationErrorTests(HopMutationTestCase):
    """The fix: one AttributeMutationError, whatever the inlining mode.

    Every test here fails without the fix, in both inlining modes.
    """

    def test_map_side_effects_message(self):
        # The reproducer of #126355.
        messages = []
        for inline in (False, True):
            error = mutation_error(Issue126355(), torch.randn(3, 2), inline)
            self.assertIsInstance(error, AttributeMutationError)
            messages.append(str(error).splitlines()[0])
        self.assertEqual(messages[0], messages[1])
        self.assertExpectedInline(
            messages[0],
            """Can't inplace modify module params/buffers inside HigherOrderOp: attempted to set attribute 'w' of Issue126355""",
        )

    @parametrize("hop,mutation,target", RAISING_CASES)
    def test_mutation_raises(self, hop, mutation, target):
        error = mutation_error(
            Model(hop, mutation, target),
            make_input(hop),
            torch._dynamo.config.inline_inbuilt_nn_modules,
        )
        self.assertIsInstance(error, AttributeMutationError)
        self.assertEqual(str(error).splitlines()[0], expected_message(mutation, target))

    @parametrize("hop,mutation", RAISING_STATE_CASES)
    def test_state_mutation_raises(self, hop, mutation):
        # nn.Module's methods, its containers and its own dicts change its
        # state too: the same error, naming what changed, in both inlining
        # modes.
        inlined = torch._dynamo.config.inline_inbuilt_nn_modules
        model = StateModel(hop, mutation)
        before = state_of(model)
        error = mutation_error(model, make_input(hop), inlined)
        self.assertIsInstance(error, AttributeMutationError)
        self.assertEqual(str(error).splitlines()[0], expected_state_message(mutation))
        self.assertEqual(state_of(model), before)

    @parametrize("hop", HOPS_OF_THIS_ERA)
    def test_global_module_mutation_raises(self, hop):
        # A module reached through a global rather than through self.
        error = mutation_error(
            mutates_global_leaf(hop),
            make_input(hop),
            torch._dynamo.config.inline_inbuilt_nn_modules,
        )
        self.assertIsInstance(error, AttributeMutationError)
        self.assertEqual(
            str(error).splitlines()[0],
            f"{MESSAGE_PREFIX}: attempted to set attribute 'n' of Leaf",
        )
        self.assertEqual(GLOBAL_LEAF.n, 0)

    @settings(max_examples=30, deadline=None)
    @given(
        hop=st.sampled_from(HOPS_OF_THIS_ERA),
        mutation=st.sampled_from(TRACED_IN_BOTH_MODES),
        depth=st.integers(min_value=0, max_value=2),
    )
    def test_same_error_in_both_modes_property(self, hop, mutation, depth):
        target = TARGETS[depth]
        errors = [
            mutation_error(Model(hop, mutation, target), make_input(hop), inline)
            for inline in (False, True)
        ]
        self.assertIs(type(errors[0]), AttributeMutationError)
        self.assertIs(type(errors[1]), type(errors[0]))
        # The message; the user stack under it may differ by the frame of an
        # inlined nn.Module.__setattr__.
        messages = [str(e).splitlines()[0] for e in errors]
        self.assertEqual(messages[1], messages[0])
        self.assertFallbackMatchesEager(
            lambda: Model(hop, mutation, target), make_input(hop)
        )


class HopModuleMutationControlTests(HopMutationTestCase):
    """What already works keeps working, patched or not."""

    @parametrize("target", TARGETS)
    @parametrize("mutation", MUTATIONS_OF_THIS_ERA)
    @parametrize("hop", HOPS_OF_THIS_ERA)
    def test_fallback_matches_eager(self, hop, mutation, target):
        self.assertFallbackMatchesEager(
            lambda: Model(hop, mutation, target), make_input(hop)
        )

    @parametrize("target", TARGETS)
    @parametrize("mutation", MUTATIONS_OF_THIS_ERA)
    def test_mutation_at_root_compiles(self, mutation, target):
        if untraced_at_root(mutation):
            # The graph break of this release, not the fix's error.
            with self.assertRaises(Unsupported) as cm:
                torch.compile(
                    Root("wrap", mutation, target), backend="eager", fullgraph=True
                )(torch.randn(3, 2))
            self.assertNotIsInstance(cm.exception, AttributeMutationError)
            return
        self.assertFullgraphMatchesEager(
            lambda: Root("wrap", mutation, target), torch.randn(3, 2)
        )

    def test_untraced_at_root_keeps_dynamos_error(self):
        # What this Dynamo does not trace even at the root gets its own
        # error in a HigherOrderOp body too, and changes nothing.
        cases = [
            (Model(*case), Root(*case), module_state, case[0])
            for case in UNTRACED_CASES
        ]
        cases += [
            (StateModel(*case), StateModel("root", case[1]), state_of, case[0])
            for case in UNTRACED_STATE_CASES
        ]
        self.assertTrue(cases)
        inlined = torch._dynamo.config.inline_inbuilt_nn_modules
        for model, root, state, hop in cases:
            before = state(model)
            errors = [
                mutation_error(root, torch.randn(3, 2), inlined),
                mutation_error(model, make_input(hop), inlined),
            ]
            for error in errors:
                self.assertIsInstance(error, Unsupported, msg=str(error))
                self.assertNotIsInstance(error, AttributeMutationError)
            self.assertEqual(state(model), before)

    @parametrize("target", TARGETS)
    @parametrize("mutation", MUTATIONS_OF_THIS_ERA)
    def test_mutation_at_root_fallback_matches_eager(self, mutation, target):
        self.assertFallbackMatchesEager(
            lambda: Root("wrap", mutation, target), torch.randn(3, 2)
        )

    @parametrize("hop,mutation", STATE_CASES_OF_THIS_ERA)
    def test_state_mutation_fallback_matches_eager(self, hop, mutation):
        self.assertFallbackMatchesEager(
            lambda: StateModel(hop, mutation), make_input(hop), state_of
        )

    @parametrize("mutation", ROOT_STATE_MUTATIONS)
    def test_state_mutation_at_root_fallback_matches_eager(self, mutation):
        # Compiled where this release traces the change at the root, and
        # eager after a graph break where it does not: like eager either way.
        self.assertFallbackMatchesEager(
            lambda: StateModel("root", mutation), torch.randn(3, 2), state_of
        )

    @parametrize("hop", HOPS_OF_THIS_ERA)
    def test_module_created_in_body_can_be_mutated(self, hop):
        self.assertFullgraphMatchesEager(
            lambda: CreatesInBody(
                hop, deletes=not untraced_at_root("delete_attribute", inlined=True)
            ),
            make_input(hop),
        )

    @parametrize("transform", ("vmap", "grad"))
    def test_functorch_transform_body_can_mutate(self, transform):
        # torch.func transforms are inlined at the root tracer, not traced
        # into a subgraph, so their bodies may mutate outer modules.
        self.assertFullgraphMatchesEager(
            lambda: Transformed(transform), torch.randn(3, 2)
        )

    @parametrize("hop", HOPS_OF_THIS_ERA)
    def test_outer_plain_object_keeps_generic_error(self, hop):
        class Config:
            n = 0

        class HoldsObject(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.config = Config()

            def forward(self, x):
                config = self.config

                def body(t):
                    config.n = 1
                    return t + 1

                return HOPS[hop](body, x)

        error = mutation_error(
            HoldsObject(),
            make_input(hop),
            torch._dynamo.config.inline_inbuilt_nn_modules,
        )
        self.assertNotIsInstance(error, AttributeMutationError)
        self.assertRegex(
            str(error),
            re.escape(
                "HigherOrderOperator: Mutating a variable not in the current scope (SideEffects)"
            ),
        )


instantiate_parametrized_tests(HopModuleMutationErrorTests)
instantiate_parametrized_tests(HopModuleMutationControlTests)


if __name__ == "__main__":
    from torch._dynamo.test_case import run_tests

    run_tests()
