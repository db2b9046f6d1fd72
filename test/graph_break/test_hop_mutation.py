# Owner(s): ["module: dynamo"]
"""
Mutating an nn.Module attribute from inside a HigherOrderOp body.

The body of a HigherOrderOp is traced into a subgraph that cannot carry side
effects on its enclosing scope, so Dynamo refuses to set or delete an
attribute of a module that lives outside the body. Whatever form the mutation
takes, it must be refused with one graph break, "nn.Module mutation in
HigherOrderOp", that names the attribute, the module's class and the
HigherOrderOp (https://github.com/pytorch/pytorch/issues/126355), and
everything Dynamo accepts today must keep behaving like eager.
"""

import functools
import json
import re
from pathlib import Path

import torch
import torch._dynamo.test_case
import torch.utils.checkpoint
from functorch.experimental.control_flow import map as control_flow_map
from hypothesis import given, settings, strategies as st
from torch._dynamo.exc import (
    InternalTorchDynamoError,
    UncapturedHigherOrderOpError,
    Unsupported,
)
from torch._higher_order_ops.while_loop import while_loop
from torch._higher_order_ops.wrap import wrap
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
)

GB_TYPE = "nn.Module mutation in HigherOrderOp"
ALIASED_GB_TYPE = "HOP: aliased intermediate used outside the subgraph"


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


@torch.compiler.nested_compile_region
def _call_body_in_region(body, x):
    return body(x)


def _nested_compile_region(body, x):
    return _call_body_in_region(body, x)


def _map_in_cond(body, x):
    return _cond(lambda t: control_flow_map(body, t), x)


def _call_inside(wrapping, hop, body, x):
    """hop(body, x), called from the body of HOPS[wrapping]."""
    return HOPS[wrapping](lambda t: hop(body, t), x)


# Each calls its body once or more on a (3, 2) tensor; the body returns t + 1.
HOPS = {
    "map": control_flow_map,
    "cond": _cond,
    "while_loop": _while_loop,
    "wrap": wrap,
    "checkpoint": _checkpoint,
    "autograd_function": _autograd_function,
    "nested_compile_region": _nested_compile_region,
    "map_in_cond": _map_in_cond,
}

# How Dynamo names the HigherOrderOp whose body does the mutation.
HOP_NAMES = {
    "map": "torch.ops.higher_order.map_impl",
    "cond": "torch.cond",
    "while_loop": "torch.while_loop",
    "wrap": "wrap",
    "checkpoint": "torch.utils.checkpoint.checkpoint",
    "map_in_cond": "torch.ops.higher_order.map_impl",
}

# An autograd.Function forward and a nested_compile_region (invoke_subgraph)
# may have side effects on purpose.
REFUSING_HOPS = tuple(HOP_NAMES)


def _iadd_tensor(m):
    m.w += 1


def _iadd_buffer(m):
    m.buf += 1


def _iadd_parameter(m):
    m.p += 1


def _rebind_tensor(m):
    m.w = torch.ones(1)


def _rebind_buffer(m):
    m.buf = m.buf + 1


def _rebind_int(m):
    m.n = m.n + 1


def _new_attribute(m):
    m.fresh = 1


def _builtin_setattr(m, name="w"):
    # The builtin is the form under test, not an attribute store.
    setattr(m, name, m.w + 1)


def _object_setattr(m):
    object.__setattr__(m, "w", m.w + 1)


def _delete_attribute(m):
    del m.w


def _builtin_delattr(m, name="w"):
    delattr(m, name)


def _delete_buffer(m):
    del m.buf


def _new_submodule(m):
    m.extra = torch.nn.Identity()


def _eval(m):
    m.eval()


# name -> (mutation, the attribute it touches first, whether it deletes it)
MUTATIONS = {
    "iadd_tensor": (_iadd_tensor, "w", False),
    "iadd_buffer": (_iadd_buffer, "buf", False),
    "iadd_parameter": (_iadd_parameter, "p", False),
    "rebind_tensor": (_rebind_tensor, "w", False),
    "rebind_buffer": (_rebind_buffer, "buf", False),
    "rebind_int": (_rebind_int, "n", False),
    "new_attribute": (_new_attribute, "fresh", False),
    "builtin_setattr": (_builtin_setattr, "w", False),
    "object_setattr": (_object_setattr, "w", False),
    "delete_attribute": (_delete_attribute, "w", True),
    "builtin_delattr": (_builtin_delattr, "w", True),
    "delete_buffer": (_delete_buffer, "buf", True),
    "new_submodule": (_new_submodule, "extra", False),
    "eval": (_eval, "training", False),
}

# In an autograd.Function forward these store back the result of an in-place
# op, which aliases the module's tensor: Dynamo cannot return it from the
# forward's subgraph, so it graph breaks instead of compiling.
ALIASED_RESULT = ("iadd_tensor", "iadd_buffer", "iadd_parameter")

# Dynamo supports neither object.__setattr__ nor del on a module it does not
# inline (an NNModuleVariable), even at the root.
STATIC_MUTATIONS = tuple(
    m for m in MUTATIONS if m != "object_setattr" and not MUTATIONS[m][2]
)

# The module whose attribute is mutated: the compiled module itself, a chain
# of user-defined submodules, or a builtin one.
TARGETS = ("self", "submodule", "submodule_of_submodule", "linear")

# Every form of the mutation once, each refusing HigherOrderOp and each
# target at least twice: (hop, mutation, target).
CASES = tuple(
    (REFUSING_HOPS[i % len(REFUSING_HOPS)], mutation, TARGETS[i % len(TARGETS)])
    for i, mutation in enumerate(MUTATIONS)
)


def _add_state(m):
    m.w = torch.tensor(1.0)
    m.register_buffer("buf", torch.zeros(1))
    m.register_parameter("p", torch.nn.Parameter(torch.zeros(1), requires_grad=False))
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


class Flips(Model):
    """Sets and restores attributes of the target inside the body."""

    def __init__(self, hop, target):
        super().__init__(hop, "rebind_int", target)
        self.target_module().flag = False

    def forward(self, x):
        module = self.target_module()

        def body(t):
            module.flag = True
            module.n = 5
            module.n = 0
            module.flag = False
            return t + 1

        return self.hop(body, x)


class Scratch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.tensor(1.0)
        self.n = 0


class CreatesInBody(torch.nn.Module):
    """Creates a module inside the body of HOPS[hop] and mutates it there."""

    def __init__(self, hop):
        super().__init__()
        self.hop = HOPS[hop]

    def forward(self, x):
        def body(t):
            m = Scratch()
            m.w = m.w + 1
            m.n = 3
            m.created = 2
            del m.n
            return t + m.w + m.created

        return self.hop(body, x)


def static_model(hop, mutation):
    """A Model that Dynamo does not inline: an NNModuleVariable."""
    model = Model(hop, mutation, "self")
    model.torchdynamo_force_dynamic = False
    return model


def make_input(hop):
    x = torch.arange(6.0).reshape(3, 2)
    return x.requires_grad_() if hop == "autograd_function" else x


def class_name(target):
    return {"self": "Model", "linear": "Linear"}.get(target, "Leaf")


def expected_explanation(hop, mutation, target):
    _, attr, deletes = MUTATIONS[mutation]
    action = "delete" if deletes else "set"
    return (
        f"Attempted to {action} attribute '{attr}' of nn.Module "
        f"{class_name(target)} inside the body of {HOP_NAMES[hop]}."
    )


def module_state(model):
    """Everything a mutation can change, for every module of the model."""
    state = {}
    for name, m in model.named_modules():
        for attr in ("w", "buf", "p", "n", "fresh", "extra", "training"):
            value = getattr(m, attr, "<absent>")
            if isinstance(value, torch.Tensor):
                value = value.detach().clone()
            elif isinstance(value, torch.nn.Module):
                value = type(value)
            state[f"{name}.{attr}"] = value
    return state


def run(fn, *args):
    """fn(*args) as ("ok", output) or ("raises", type, first message line)."""
    try:
        return ("ok", fn(*args))
    except Exception as e:  # noqa: B902
        return ("raises", type(e), str(e).splitlines()[0])


def compile_error(fn, x):
    """The error fullgraph=True compilation raises."""
    torch._dynamo.reset()
    try:
        torch.compile(fn, backend="eager", fullgraph=True)(x)
    except (Unsupported, UncapturedHigherOrderOpError, InternalTorchDynamoError) as e:
        return e
    raise AssertionError("compilation did not raise")


def graph_break(error):
    """(gb_type, explanation) of a graph break, also when map, cond or
    while_loop wrap it in an UncapturedHigherOrderOpError."""
    text = str(error)
    if isinstance(error, UncapturedHigherOrderOpError):
        _, _, text = text.partition("Got graph break/error:\n\n")
    lines = text.splitlines()
    explanations = [
        line.strip().removeprefix("Explanation: ")
        for line in lines
        if line.strip().startswith("Explanation: ")
    ]
    return lines[0], explanations[0] if explanations else None


def registry_entry(gb_type):
    """The newest entry of gb_type in the installed graph_break_registry.json."""
    path = Path(torch._dynamo.__file__).parent / "graph_break_registry.json"
    registry = json.loads(path.read_text())
    entries = [e for e in registry.values() if e[0]["Gb_type"] == gb_type]
    if len(entries) != 1:
        raise AssertionError(f"{gb_type!r} is in the registry {len(entries)} times")
    return entries[0][0]


class HopMutationTestCase(torch._dynamo.test_case.TestCase):
    def assertModuleMutationBreak(self, error, hop, mutation, target):
        gb_type, explanation = graph_break(error)
        self.assertEqual(gb_type, GB_TYPE, msg=str(error))
        self.assertTrue(
            explanation.startswith(expected_explanation(hop, mutation, target)),
            msg=explanation,
        )

    def assertBreakMatchesRegistry(self, error):
        # The newest entry of its gb_type in graph_break_registry.json
        # documents the break as it is raised.
        gb_type, explanation = graph_break(error)
        entry = registry_entry(gb_type)
        pattern = "".join(
            ".*" if part.startswith("{") else re.escape(part)
            for part in re.split(r"(\{[^}]*\})", entry["Explanation"])
        )
        self.assertRegex(explanation, f"^{pattern}$")
        for hint in entry["Hints"]:
            self.assertIn(hint.strip(), str(error))

    def assertOuterPlainObjectKeepsGenericBreaks(self, hop):
        # Not a module: the generic breaks, as before the fix.
        class Config:
            n = 0
            t = torch.zeros(1)

        for value, gb_type in (
            ("constant", "HOP: Non-nullified side effect"),
            ("tensor", "HOP: Unsafe side effect"),
        ):
            config = Config()

            def fn(x, config=config, value=value):
                def body(t):
                    if value == "constant":
                        config.n = 1
                    else:
                        config.t = t.sum()
                    return t + 1

                return HOPS[hop](body, x)

            error = compile_error(fn, make_input(hop))
            self.assertEqual(graph_break(error)[0], gb_type)

    def assertBreakNamesInnermostHop(self, outer, hop, mutation, target):
        # However deeply the body is nested (in the HOPs `outer` names), the
        # break names the HigherOrderOp whose body mutates, and nothing changes.
        model = Model(hop, mutation, target)
        for wrapping in outer:
            model.hop = functools.partial(_call_inside, wrapping, model.hop)
        before = module_state(model)
        error = compile_error(model, make_input(hop))
        self.assertModuleMutationBreak(error, hop, mutation, target)
        self.assertEqual(module_state(model), before)

    def assertCheckpointHint(self, hop, model, shown):
        # The break of model's `self.buf += 1` (on self, in hop): a workaround
        # for every HigherOrderOp, the checkpoint flag only where `shown`, and
        # no claim that Dynamo will never support it.
        error = compile_error(model, make_input(hop))
        self.assertModuleMutationBreak(error, hop, "iadd_buffer", "self")
        message = str(error)
        self.assertIn("return the new value from the body", message)
        self.assertEqual(
            "skip_fwd_side_effects_in_bwd_under_checkpoint" in message, shown
        )
        self.assertNotIn("fundamental", message)

    def assertFullgraphMatchesEager(self, model_fn, x):
        eager_model, compiled_model = model_fn(), model_fn()
        expected = eager_model(x)
        torch._dynamo.reset()
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
    """One graph break that says what was mutated, and where."""

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

        error = compile_error(Module(), torch.randn(3, 2))
        self.assertIsInstance(error, UncapturedHigherOrderOpError)
        self.assertExpectedInline(
            "\n".join(graph_break(error)),
            """\
nn.Module mutation in HigherOrderOp
Attempted to set attribute 'w' of nn.Module Module inside the body of torch.ops.higher_order.map_impl. A HigherOrderOp body may not modify an nn.Module that was created outside of it: not its params or buffers, nor any other attribute.""",  # noqa: B950
        )

    @parametrize("hop,mutation,target", CASES)
    def test_mutation_breaks(self, hop, mutation, target):
        model = Model(hop, mutation, target)
        before = module_state(model)
        error = compile_error(model, make_input(hop))
        self.assertModuleMutationBreak(error, hop, mutation, target)
        self.assertEqual(module_state(model), before)

    @parametrize("hop", REFUSING_HOPS)
    def test_reproducer_breaks_in_every_hop(self, hop):
        error = compile_error(Model(hop, "iadd_tensor", "self"), make_input(hop))
        self.assertModuleMutationBreak(error, hop, "iadd_tensor", "self")

    def test_global_module_mutation_breaks(self):
        # A module reached through a global rather than through self.
        def fn(x):
            def body(t):
                GLOBAL_LEAF.n = GLOBAL_LEAF.n + 1
                return t + 1

            return wrap(body, x)

        error = compile_error(fn, make_input("wrap"))
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

    @parametrize("target", ("self", "linear"))
    def test_autograd_function_aliased_result_breaks(self, target):
        # `m.w += 1` in an autograd.Function forward stores back a result
        # that aliases m.w. This was an InternalTorchDynamoError, which
        # fullgraph=False did not fall back from either.
        make_model = functools.partial(
            Model, "autograd_function", "iadd_tensor", target
        )
        x = make_input("autograd_function")
        error = compile_error(make_model(), x)
        self.assertIsInstance(error, Unsupported)
        self.assertEqual(graph_break(error)[0], ALIASED_GB_TYPE)
        self.assertFallbackMatchesEager(make_model, x)

    @parametrize("target", ("self", "linear"))
    def test_nested_compile_region_aliased_result_breaks(self, target):
        # The same store back from a nested_compile_region body, whose
        # invoke_subgraph filters aliased intermediates too.
        make_model = functools.partial(
            Model, "nested_compile_region", "iadd_buffer", target
        )
        x = make_input("nested_compile_region")
        error = compile_error(make_model(), x)
        self.assertIsInstance(error, Unsupported)
        self.assertEqual(graph_break(error)[0], ALIASED_GB_TYPE)
        self.assertFallbackMatchesEager(make_model, x)

    def test_outer_plain_object_new_attribute_generic_break(self):
        # Not a module: the generic break, instead of the repr of the
        # AttributeError Dynamo hit while looking for the old value.
        class Config:
            pass

        config = Config()

        def fn(x):
            def body(t):
                config.fresh = 1
                return t + 1

            return wrap(body, x)

        error = compile_error(fn, make_input("wrap"))
        self.assertEqual(graph_break(error)[0], "HOP: Unsafe side effect")
        self.assertFalse(hasattr(config, "fresh"))

    def test_checkpoint_hint_only_where_the_flag_helps(self):
        # skip_fwd_side_effects_in_bwd_under_checkpoint allows the side
        # effects of an inlined module under checkpoint, and nothing else.
        for hop, model, shown in (
            ("checkpoint", Model("checkpoint", "iadd_buffer", "self"), True),
            ("map", Model("map", "iadd_buffer", "self"), False),
            ("checkpoint", static_model("checkpoint", "iadd_buffer"), False),
        ):
            self.assertCheckpointHint(hop, model, shown)

    @settings(max_examples=8, deadline=None)
    @given(
        outer=st.lists(st.sampled_from(("wrap", "cond")), min_size=1, max_size=2),
        case=st.sampled_from(CASES),
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

    @parametrize("mutation", ("iadd_buffer", "rebind_int", "delete_attribute"))
    def test_checkpoint_side_effects_allowed_by_config(self, mutation):
        with torch._dynamo.config.patch(
            skip_fwd_side_effects_in_bwd_under_checkpoint=True
        ):
            self.assertFullgraphMatchesEager(
                lambda: Model("checkpoint", mutation, "self"),
                make_input("checkpoint"),
            )

    @parametrize("hop", ("map", "cond"))
    def test_nullified_mutation_compiles(self, hop):
        # A flag set and restored inside the body leaves no side effect.
        self.assertFullgraphMatchesEager(lambda: Flips(hop, "linear"), make_input(hop))

    @parametrize("hop", ("map", "wrap", "autograd_function"))
    def test_module_created_in_body_can_be_mutated(self, hop):
        self.assertFullgraphMatchesEager(lambda: CreatesInBody(hop), make_input(hop))

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
            error = compile_error(Model(hop, mutation, "self"), make_input(hop))
            self.assertBreakMatchesRegistry(error)


instantiate_parametrized_tests(HopModuleMutationErrorTests)
instantiate_parametrized_tests(HopModuleMutationControlTests)


if __name__ == "__main__":
    from torch._dynamo.test_case import run_tests

    run_tests()
