# Owner(s): ["module: dynamo"]
"""
Changing the state of an nn.Module created outside a HigherOrderOp body from
inside it, where the HigherOrderOp does not allow side effects, is one graph
break that names the change and the module, whatever the form of the change,
for a module Dynamo inlines and one it does not (NNModuleVariable).
"""

import copy

import torch
import torch._dynamo.test_case
from functorch.experimental.control_flow import map as control_flow_map
from torch._dynamo.exc import UncapturedHigherOrderOpError, Unsupported
from torch._higher_order_ops.while_loop import while_loop
from torch._higher_order_ops.wrap import wrap
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
)
from torch.utils.checkpoint import checkpoint

GB_TYPE = "nn.Module mutation in HigherOrderOp"


def while_loop_body(body, x):
    _, out = while_loop(
        lambda i, t: i < 2, lambda i, t: (i + 1, body(t)), (torch.tensor(0), x)
    )
    return out


class CallBody(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, body):
        return body(x)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


@torch.compiler.nested_compile_region
def nested_compile_region_body(body, x):
    return body(x)


# Each calls body on x inside the HigherOrderOp: these refuse side effects,
HOPS = {
    "map": control_flow_map,
    "cond": lambda body, x: torch.cond(x.sum() > 0, body, lambda t: t + 1, (x,)),
    "while_loop": while_loop_body,
    "wrap": wrap,
    "checkpoint": lambda body, x: checkpoint(body, x, use_reentrant=False),
}
# and these allow them.
ALLOWING_HOPS = {
    "autograd_function": lambda body, x: CallBody.apply(x, body),
    "nested_compile_region": nested_compile_region_body,
}


def iadd(m):
    m.w += 1


def set_tensor(m):
    m.buf = m.buf + 1


def set_int(m):
    m.n = 5


def delete_buffer(m):
    del m.buf


def setitem_buffers(m):
    m._buffers["buf"] = torch.zeros(2)


def setitem_dunder_dict(m):
    m.__dict__["n"] = 11


# {form: (the change, what the graph break says it did, to which module)}
FORMS = {
    "iadd": (iadd, "set attribute 'w' of", "Model"),
    "set_tensor": (set_tensor, "set attribute 'buf' of", "Model"),
    "set_int": (set_int, "set attribute 'n' of", "Model"),
    "delete_buffer": (delete_buffer, "delete attribute 'buf' of", "Model"),
    "register_buffer": (
        lambda m: m.register_buffer("extra", torch.ones(2)),
        "change the _buffers of",
        "Model",
    ),
    "add_module": (
        lambda m: m.add_module("extra", torch.nn.Identity()),
        "change the _modules of",
        "Model",
    ),
    "setitem_buffers": (setitem_buffers, "change the _buffers of", "Model"),
    "setitem_dunder_dict": (setitem_dunder_dict, "change the __dict__ of", "Model"),
    "eval": (lambda m: m.eval(), "set attribute 'training' of", "Model"),
    "append_module_list": (
        lambda m: m.layers.append(torch.nn.Identity()),
        "change the _modules of",
        "ModuleList",
    ),
    "register_buffer_submodule": (
        lambda m: m.lin.register_buffer("extra", torch.ones(2)),
        "change the _buffers of",
        "Linear",
    ),
}


class Model(torch.nn.Module):
    def __init__(self, hop, form):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(2), requires_grad=False)
        self.register_buffer("buf", torch.ones(2))
        self.lin = torch.nn.Linear(2, 2)
        self.layers = torch.nn.ModuleList([torch.nn.Identity()])
        self.n = 3
        self.hop = {**HOPS, **ALLOWING_HOPS}[hop]
        self.change = FORMS[form][0]

    def forward(self, x):
        def body(t):
            out = self.lin(t) + self.buf
            self.change(self)
            return out

        return self.hop(body, x)


def state(model):
    """What a form can change: the module's own dicts and attributes."""
    return (
        {k: v.clone() for k, v in model._parameters.items()},
        {k: v.clone() for k, v in model._buffers.items()},
        {k: type(v) for k, v in model._modules.items()},
        [type(m) for m in model.layers],
        dict(model.lin._buffers),
        model.n,
        model.training,
    )


def make_input(hop):
    return torch.randn(3, 2, requires_grad=hop == "autograd_function")


class HopModuleMutationErrorTests(torch._dynamo.test_case.TestCase):
    def assertModuleMutationBreak(self, model, hop, form):
        before = state(model)
        _, change, class_name = FORMS[form]
        explanation = (
            f"Attempted to {change} nn.Module {class_name}, which was "
            "created outside of this HigherOrderOp's body."
        )
        compiled = torch.compile(model, backend="eager", fullgraph=True)
        if hop in ("map", "cond", "while_loop"):
            # Their body is speculated: its graph break is wrapped.
            with self.assertRaises(UncapturedHigherOrderOpError) as cm:
                compiled(make_input(hop))
            self.assertIn(f"{GB_TYPE}\n", str(cm.exception))
        else:
            with self.assertRaises(Unsupported) as cm:
                compiled(make_input(hop))
            self.assertEqual(cm.exception.gb_type, GB_TYPE)
        self.assertIn(f"Explanation: {explanation}", str(cm.exception))
        self.assertEqual(state(model), before)

    @parametrize("hop", list(HOPS))
    @parametrize("form", list(FORMS))
    def test_mutation_breaks(self, hop, form):
        self.assertModuleMutationBreak(Model(hop, form), hop, form)

    @parametrize("form", ["set_tensor", "set_int", "register_buffer", "eval"])
    def test_nn_module_variable_mutation_breaks(self, form):
        # Dynamo does not inline this module: it installs it in the graph as
        # it is (an NNModuleVariable), as it does for torch.export.
        model = Model("cond", form)
        model.torchdynamo_force_dynamic = False
        self.assertModuleMutationBreak(model, "cond", form)

    def test_nested_hop_mutation_breaks(self):
        model = Model("cond", "set_int")
        model.hop = lambda body, x: HOPS["cond"](lambda t: control_flow_map(body, t), x)
        self.assertModuleMutationBreak(model, "cond", "set_int")

    def test_checkpoint_break_hints_at_config(self):
        model = Model("checkpoint", "set_int")
        with self.assertRaisesRegex(
            Unsupported, "skip_fwd_side_effects_in_bwd_under_checkpoint = True"
        ):
            torch.compile(model, backend="eager", fullgraph=True)(make_input(""))


class HopModuleMutationControlTests(torch._dynamo.test_case.TestCase):
    def assertMatchesEager(self, model, hop):
        eager_model, compiled_model = model, copy.deepcopy(model)
        x = make_input(hop)
        expected = eager_model(x)
        actual = torch.compile(compiled_model, backend="eager", fullgraph=True)(x)
        self.assertEqual(actual, expected)
        self.assertEqual(state(compiled_model), state(eager_model))

    @parametrize("hop", list(ALLOWING_HOPS))
    @parametrize("form", ["set_tensor", "set_int", "register_buffer"])
    def test_allowing_hop_mutation_matches_eager(self, hop, form):
        self.assertMatchesEager(Model(hop, form), hop)

    @parametrize("form", ["set_tensor", "set_int", "delete_buffer"])
    def test_checkpoint_mutation_allowed_by_config(self, form):
        with torch._dynamo.config.patch(
            skip_fwd_side_effects_in_bwd_under_checkpoint=True
        ):
            self.assertMatchesEager(Model("checkpoint", form), "checkpoint")

    @parametrize("hop", list(HOPS))
    def test_module_created_in_body_mutation_matches_eager(self, hop):
        def body(t):
            m = torch.nn.Identity()
            m.register_buffer("extra", torch.ones(2))
            m.n = 5
            return m(t) + m.extra + m.n

        def f(x):
            return HOPS[hop](body, x)

        x = make_input(hop)
        self.assertEqual(torch.compile(f, backend="eager", fullgraph=True)(x), f(x))


instantiate_parametrized_tests(HopModuleMutationErrorTests)
instantiate_parametrized_tests(HopModuleMutationControlTests)


if __name__ == "__main__":
    from torch._dynamo.test_case import run_tests

    run_tests()
