# Owner(s): ["module: dynamo"]
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

import torch
import torch._dynamo.test_case
import torch.utils.checkpoint
from functorch.experimental.control_flow import map as control_flow_map
from hypothesis import given, settings, strategies as st
from torch._dynamo.exc import AttributeMutationError, Unsupported
from torch._higher_order_ops.while_loop import while_loop
from torch._higher_order_ops.wrap import wrap
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
)

MESSAGE_PREFIX = "Can't inplace modify module params/buffers inside HigherOrderOp"


class _CallBody(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, body):
        return body(x)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def _cond(body, x):
    return torch.cond(x.sum() > 0, body, lambda t: t + 1, (x,))


def _while_loop(body, x):
    _, out = while_loop(
        lambda i, t: i < 2, lambda i, t: (i + 1, body(t)), (torch.tensor(0), x)
    )
    return out


def _checkpoint(body, x):
    return torch.utils.checkpoint.checkpoint(body, x, use_reentrant=False)


def _autograd_function(body, x):
    return _CallBody.apply(x, body)


# Each calls its body once or more on a (3, 2) tensor; the body returns t + 1.
HOPS = {
    "map": control_flow_map,
    "cond": _cond,
    "while_loop": _while_loop,
    "wrap": wrap,
    "checkpoint": _checkpoint,
    "autograd_function": _autograd_function,
}


def _iadd_tensor(m):
    m.w += 1


def _iadd_buffer(m):
    m.buf += 1


def _rebind_tensor(m):
    m.w = torch.ones(1)


def _rebind_int(m):
    m.n = m.n + 1


def _new_attribute(m):
    m.created = 1


def _builtin_setattr(m):
    # The builtin is the form under test, not an attribute store.
    setattr(m, "w", m.w + 1)  # noqa: B010


def _object_setattr(m):
    object.__setattr__(m, "w", m.w + 1)


def _delete_attribute(m):
    del m.w


# name -> (mutation, the attribute it touches, whether it deletes it)
MUTATIONS = {
    "iadd_tensor": (_iadd_tensor, "w", False),
    "iadd_buffer": (_iadd_buffer, "buf", False),
    "rebind_tensor": (_rebind_tensor, "w", False),
    "rebind_int": (_rebind_int, "n", False),
    "new_attribute": (_new_attribute, "created", False),
    "builtin_setattr": (_builtin_setattr, "w", False),
    "object_setattr": (_object_setattr, "w", False),
    "delete_attribute": (_delete_attribute, "w", True),
}

# object.__setattr__ on a module that is not inlined is not supported even at
# the root (a graph break); the root tests cover it with the fallback.
ROOT_COMPILES = tuple(m for m in MUTATIONS if m != "object_setattr")


def deletion_traced(inlined):
    """Whether Dynamo traces `del module.attr` at all, root or not.

    From 2.8 it traces the deletion as a call of the module's __delattr__,
    which 2.8 supports for neither module variable kind and later releases
    only for an inlined module (a module created while tracing always is).
    Where it does not, the deletion is a graph break before and after the
    fix, which the fallback tests cover.
    """
    if torch.__version__ < (2, 8):
        return True
    return inlined and torch.__version__ >= (2, 9)


# The module whose attribute is mutated: the compiled module itself, a chain
# of user-defined submodules, or a builtin one.
TARGETS = ("self", "submodule", "submodule_of_submodule", "linear")


def _add_state(m):
    m.w = torch.tensor(1.0)
    m.register_buffer("buf", torch.zeros(1))
    m.n = 0
    return m


class Leaf(torch.nn.Module):
    def __init__(self, depth):
        super().__init__()
        _add_state(self)
        if depth > 1:
            self.sub = Leaf(depth - 1)


GLOBAL_LEAF = Leaf(1)


class Model(torch.nn.Module):
    def __init__(self, hop, mutation, target):
        super().__init__()
        _add_state(self)
        self.sub = Leaf(2)
        self.lin = _add_state(torch.nn.Linear(2, 2))
        self.hop = HOPS[hop]
        self.mutate = MUTATIONS[mutation][0]
        self.target = target

    def target_module(self):
        if self.target == "self":
            return self
        if self.target == "submodule":
            return self.sub
        if self.target == "submodule_of_submodule":
            return self.sub.sub
        return self.lin

    def forward(self, x):
        def body(t):
            self.mutate(self.target_module())
            return t + 1

        return self.hop(body, x)


class Root(Model):
    def forward(self, x):
        self.mutate(self.target_module())
        return x + 1


def make_input(hop):
    x = torch.arange(6.0).reshape(3, 2)
    return x.requires_grad_() if hop == "autograd_function" else x


def expected_message(mutation, target):
    _, attr, deletes = MUTATIONS[mutation]
    action = "delete" if deletes else "set"
    cls = "Linear" if target == "linear" else ("Model" if target == "self" else "Leaf")
    return f"{MESSAGE_PREFIX}: attempted to {action} attribute '{attr}' of {cls}"


def module_state(model):
    """Everything a mutation can change, for every module of the model."""
    state = {}
    for name, m in model.named_modules():
        for attr in ("w", "buf", "n", "created"):
            value = getattr(m, attr, "<absent>")
            if isinstance(value, torch.Tensor):
                value = value.detach().clone()
            state[f"{name}.{attr}"] = value
    return state


def run(fn, *args):
    """fn(*args) as ("ok", output) or ("raises", type, first message line)."""
    try:
        return ("ok", fn(*args))
    except Exception as e:  # noqa: B902
        return ("raises", type(e), str(e).splitlines()[0])


def compile_error(fn, x, inline):
    """The error fullgraph=True compilation raises, unwrapping the
    UncapturedHigherOrderOpError that map, cond and while_loop raise around
    it (from 2.9 `from None`: the error is then its context, not its cause)."""
    with torch._dynamo.config.patch(inline_inbuilt_nn_modules=inline):
        torch._dynamo.reset()
        try:
            torch.compile(fn, backend="eager", fullgraph=True)(x)
        except torch._dynamo.exc.UncapturedHigherOrderOpError as e:
            return e.__cause__ or e.__context__
        except Unsupported as e:
            return e
    raise AssertionError("compilation did not raise")


class HopMutationTestCase(torch._dynamo.test_case.TestCase):
    def assertFullgraphMatchesEager(self, model_fn, x):
        eager_model, compiled_model = model_fn(), model_fn()
        expected = eager_model(x)
        actual = torch.compile(compiled_model, backend="eager", fullgraph=True)(x)
        self.assertEqual(actual, expected)
        self.assertEqual(module_state(compiled_model), module_state(eager_model))

    def assertFallbackMatchesEager(self, model_fn, x):
        eager_model, compiled_model = model_fn(), model_fn()
        torch._dynamo.reset()
        compiled = run(torch.compile(compiled_model, backend="eager"), x)
        expected = run(eager_model, x)
        self.assertEqual(compiled[0], expected[0], msg=f"{compiled} != {expected}")
        if expected[0] == "raises":
            self.assertIs(compiled[1], expected[1])
        else:
            self.assertEqual(compiled[1], expected[1])
        self.assertEqual(module_state(compiled_model), module_state(eager_model))


class HopModuleMutationErrorTests(HopMutationTestCase):
    """The fix: one AttributeMutationError, whatever the inlining mode.

    Every test here fails without the fix, in both inlining modes.
    """

    def test_map_side_effects_message(self):
        # The reproducer of #126355.
        class Module(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.w = torch.tensor(1)

            def forward(self, xs):
                def body(x):
                    self.w += 1
                    return x

                return control_flow_map(body, xs)

        messages = []
        for inline in (False, True):
            error = compile_error(Module(), torch.randn(3, 2), inline)
            self.assertIsInstance(error, AttributeMutationError)
            messages.append(str(error).splitlines()[0])
        self.assertEqual(messages[0], messages[1])
        self.assertExpectedInline(
            messages[0],
            """Can't inplace modify module params/buffers inside HigherOrderOp: attempted to set attribute 'w' of Module""",
        )

    @parametrize("target", TARGETS)
    @parametrize("mutation", MUTATIONS)
    @parametrize("hop", HOPS)
    def test_mutation_raises(self, hop, mutation, target):
        error = compile_error(
            Model(hop, mutation, target),
            make_input(hop),
            torch._dynamo.config.inline_inbuilt_nn_modules,
        )
        self.assertIsInstance(error, AttributeMutationError)
        self.assertEqual(str(error).splitlines()[0], expected_message(mutation, target))

    @parametrize("hop", HOPS)
    def test_global_module_mutation_raises(self, hop):
        # A module reached through a global rather than through self.
        def fn(x):
            def body(t):
                GLOBAL_LEAF.n = GLOBAL_LEAF.n + 1
                return t + 1

            return HOPS[hop](body, x)

        error = compile_error(
            fn, make_input(hop), torch._dynamo.config.inline_inbuilt_nn_modules
        )
        self.assertIsInstance(error, AttributeMutationError)
        self.assertEqual(
            str(error).splitlines()[0],
            f"{MESSAGE_PREFIX}: attempted to set attribute 'n' of Leaf",
        )
        self.assertEqual(GLOBAL_LEAF.n, 0)

    @settings(max_examples=30, deadline=None)
    @given(
        hop=st.sampled_from(sorted(HOPS)),
        mutation=st.sampled_from(sorted(MUTATIONS)),
        depth=st.integers(min_value=0, max_value=2),
    )
    def test_same_error_in_both_modes_property(self, hop, mutation, depth):
        target = TARGETS[depth]
        errors = [
            compile_error(Model(hop, mutation, target), make_input(hop), inline)
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
    @parametrize("mutation", MUTATIONS)
    @parametrize("hop", HOPS)
    def test_fallback_matches_eager(self, hop, mutation, target):
        self.assertFallbackMatchesEager(
            lambda: Model(hop, mutation, target), make_input(hop)
        )

    @parametrize("target", TARGETS)
    @parametrize("mutation", ROOT_COMPILES)
    def test_mutation_at_root_compiles(self, mutation, target):
        inlined = torch._dynamo.config.inline_inbuilt_nn_modules
        if MUTATIONS[mutation][2] and not deletion_traced(inlined):
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

    @parametrize("target", TARGETS)
    @parametrize("mutation", MUTATIONS)
    def test_mutation_at_root_fallback_matches_eager(self, mutation, target):
        self.assertFallbackMatchesEager(
            lambda: Root("wrap", mutation, target), torch.randn(3, 2)
        )

    @parametrize("hop", HOPS)
    def test_module_created_in_body_can_be_mutated(self, hop):
        deletes = deletion_traced(inlined=True)

        class Scratch(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.w = torch.tensor(1.0)
                self.n = 0

        class Creates(torch.nn.Module):
            def forward(self, x):
                def body(t):
                    m = Scratch()
                    m.w = m.w + 1
                    m.n = 3
                    m.created = 2
                    if deletes:
                        del m.n
                    return t + m.w + m.created

                return HOPS[hop](body, x)

        self.assertFullgraphMatchesEager(Creates, make_input(hop))

    @parametrize("transform", ("vmap", "grad"))
    def test_functorch_transform_body_can_mutate(self, transform):
        # torch.func transforms are inlined at the root tracer, not traced
        # into a subgraph, so their bodies may mutate outer modules.
        class Transformed(torch.nn.Module):
            def __init__(self):
                super().__init__()
                _add_state(self)

            def forward(self, x):
                def body(t):
                    self.n = self.n + 1
                    self.w = self.w + 1
                    return (t * t).sum()

                return getattr(torch.func, transform)(body)(x)

        self.assertFullgraphMatchesEager(Transformed, torch.randn(3, 2))

    @parametrize("hop", HOPS)
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

        error = compile_error(
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
