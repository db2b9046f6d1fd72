# Owner(s): ["module: dynamo"]
"""
Changing the state of an nn.Module created outside a HigherOrderOp body from
inside it, where the HigherOrderOp does not allow side effects, is the graph
break "nn.Module mutation in HigherOrderOp", which names the change and the
module: setting an attribute (a parameter, buffer or plain attribute, `+=`,
.eval()), deleting one, and changing one of the module's own dicts
(register_buffer, add_module, ModuleList.append, a write to _buffers or
__dict__). The same holds for a module Dynamo does not inline
(NNModuleVariable), except `del`, which Dynamo cannot trace on such a module
even outside a HigherOrderOp: it keeps that error.

A HigherOrderOp nested in the body may allow a change (nested_compile_region,
an autograd.Function's forward). Then a body that throws its side effects away
when its tracing ends (map, cond, while_loop) refuses, at its end, a change
that would survive it, naming itself; one that keeps them (wrap, checkpoint)
refuses a change that holds a tensor computed in it, which it does not return.
"""

import copy
import math
import sys
import types
import unittest

import torch
import torch._dynamo.test_case
import torch._dynamo.testing
from functorch.experimental.control_flow import map as control_flow_map
from torch._dynamo.exc import UncapturedHigherOrderOpError, Unsupported
from torch._higher_order_ops.while_loop import while_loop
from torch._higher_order_ops.wrap import wrap
from torch.testing._internal.common_utils import (
    decorateIf,
    instantiate_parametrized_tests,
    parametrize,
)
from torch.utils.checkpoint import checkpoint

GB_TYPE = "nn.Module mutation in HigherOrderOp"
CHECKPOINT_CONFIG = "skip_fwd_side_effects_in_bwd_under_checkpoint = True"


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


# These throw the side effects of their body away when its tracing ends.
DISCARDING_HOPS = {
    "map": "torch.ops.higher_order.map_impl",
    "cond": "torch.cond",
    "while_loop": "torch.while_loop",
}

# A change a nested HigherOrderOp made is refused when an outer body ends, by
# the state it changed: `=`, `+=` and `del` of a buffer or a parameter change
# the dict nn.Module.__setattr__ and __delattr__ keep it in; an item set in
# its __dict__ sets the attribute.
NESTED_CHANGES = {
    "set_tensor": "change the _buffers of",
    "iadd": "change the _parameters of",
    "delete_buffer": "change the _buffers of",
    "setitem_dunder_dict": "set attribute 'n' of",
}


def nest(outer, inner):
    """A HigherOrderOp whose body calls body inside another one."""
    hops = {**HOPS, **ALLOWING_HOPS}
    return lambda body, x: hops[outer](lambda t: hops[inner](body, t), x)


def iadd(m):
    m.w += 1


def set_tensor(m):
    m.buf = m.buf + 1


def set_int(m):
    m.n = 5


def set_equal_float(m):
    # Equal to 3, but a float: a change.
    m.n = 3.0


def set_new_int(m):
    m.fresh = 5


def delete_buffer(m):
    del m.buf


def set_and_restore_int(m):
    m.n = 5
    m.n = 3


def set_tensor_and_restore_int(m):
    m.n = m.buf + 1
    m.n = 3


def set_and_delete_new_attribute(m):
    m.fresh = m.buf + 1
    del m.fresh


def set_and_restore_read_int(m):
    n = m.n
    m.n = 7
    m.n = n


def set_and_restore_dunder_dict_int(m):
    m.__dict__["n"] = 5
    m.__dict__["n"] = 3


def set_and_restore_int_through_dunder_dict(m):
    m.n = 5
    m.__dict__["n"] = 3


def set_and_restore_function(m):
    change = m.change
    m.change = None
    m.change = change


def set_and_delete_frame_module_attribute(m):
    m.layers.fresh = 5
    del m.layers.fresh


GLOBAL_COUNT = 0


class Flag:
    on = False
    level = math.nan


def set_global(m):
    global GLOBAL_COUNT
    GLOBAL_COUNT = 1


def setitem_buffers(m):
    m._buffers["buf"] = torch.zeros(2)


def setitem_dunder_dict(m):
    m.__dict__["n"] = 11


def setitem_layers_vars(m):
    vars(m.layers)["n"] = 7


def setitem_layers_dunder_dict(m):
    m.layers.__dict__["n"] = 7


# {form: (the change, what the graph break says it did, to which module)}
ATTRIBUTE_FORMS = {
    "iadd": (iadd, "set attribute 'w' of", "Model"),
    "set_tensor": (set_tensor, "set attribute 'buf' of", "Model"),
    "set_int": (set_int, "set attribute 'n' of", "Model"),
    "set_equal_float": (set_equal_float, "set attribute 'n' of", "Model"),
    "set_new_int": (set_new_int, "set attribute 'fresh' of", "Model"),
    "eval": (lambda m: m.eval(), "set attribute 'training' of", "Model"),
    "delete_buffer": (delete_buffer, "delete attribute 'buf' of", "Model"),
}
DICT_FORMS = {
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
    "append_module_list": (
        lambda m: m.layers.append(torch.nn.Identity()),
        "change the _modules of",
        "ModuleList",
    ),
    "register_parameter": (
        lambda m: m.register_parameter("extra", m.w),
        "change the _parameters of",
        "Model",
    ),
    "register_buffer_submodule": (
        lambda m: m.lin.register_buffer("extra", torch.ones(2)),
        "change the _buffers of",
        "Linear",
    ),
}
FORMS = {
    **ATTRIBUTE_FORMS,
    **DICT_FORMS,
    # Model's _buffers, which lin also holds (test_dict_names_the_module_owning_it).
    "setitem_buffers_through_lin": (
        lambda m: m.lin.owner_buffers.update(buf=torch.zeros(2)),
        "change the _buffers of",
        "Model",
    ),
    # The __dict__ of the ModuleList FrameModel creates in the compiled frame.
    "setitem_layers_vars": (
        setitem_layers_vars,
        "change the __dict__ of",
        "ModuleList",
    ),
    "setitem_layers_dunder_dict": (
        setitem_layers_dunder_dict,
        "change the __dict__ of",
        "ModuleList",
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


class StoringModel(Model):
    # Sets n before the HigherOrderOp: the body changes that value.
    def forward(self, x):
        self.n = 4
        return super().forward(x)


class FrameModel(Model):
    # A module created in the compiled frame, outside the body: its dicts have
    # no source.
    def forward(self, x):
        self.layers = torch.nn.ModuleList([torch.nn.Identity()])
        return super().forward(x)


def tensor_state(t):
    return t.clone(), t.requires_grad, t.grad_fn is not None


def state(model):
    """What a form can change: the module's own dicts and attributes."""
    return (
        {k: tensor_state(v) for k, v in model._parameters.items()},
        {k: tensor_state(v) for k, v in model._buffers.items()},
        {k: type(v) for k, v in model._modules.items()},
        [type(m) for m in model.layers],
        dict(model.lin._buffers),
        model.n,
        "fresh" in vars(model),
        model.training,
    )


def make_input(*hops):
    return torch.randn(3, 2, requires_grad="autograd_function" in hops)


GLOBAL_STATE = {"nested": {}, "list": []}


class Holder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = {}


# Dicts a body may not change that are no module's own, a list and a set.
OTHER_DICT_CHANGES = {
    "module_plain_dict": lambda holder, m: holder.cache.update(k=1),
    "global_dict": lambda holder, m: GLOBAL_STATE.update(k=1),
    "nested_global_dict": lambda holder, m: GLOBAL_STATE["nested"].update(k=1),
    "global_list": lambda holder, m: GLOBAL_STATE["list"].append(1),
    # Not a dict, but a set a module holds.
    "non_persistent_buffers_set": (
        lambda holder, m: holder._non_persistent_buffers_set.add("buf")
    ),
}


def other_change_program(hop, case):
    """f(x, holder, it) makes OTHER_DICT_CHANGES[case] in a body of hop."""
    change = OTHER_DICT_CHANGES[case]

    def f(x, holder, it):
        m = next(it)

        def body(t):
            change(holder, m)
            return t + 1

        return hop(body, x)

    return f


def other_state(holder, m):
    """What OTHER_DICT_CHANGES may change."""
    return (
        holder.cache,
        set(holder._non_persistent_buffers_set),
        list(m._buffers),
        copy.deepcopy(GLOBAL_STATE),
    )


def reset_global_state():
    GLOBAL_STATE.clear()
    GLOBAL_STATE.update(nested={}, list=[])


def run_other_change(fn):
    """fn's output on fresh objects, and their state after."""
    reset_global_state()
    holder, m = Holder(), torch.nn.Identity()
    return fn(torch.ones(2), holder, iter((m,))), other_state(holder, m)


class Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)

    def forward(self, x):
        return self.lin(x)


class HopModuleMutationTestCase(torch._dynamo.test_case.TestCase):
    def assertMatchesEager(self, model, hop, fullgraph=True):
        eager_model, compiled_model = model, copy.deepcopy(model)
        x = make_input(hop)
        expected = eager_model(x)
        compiled = torch.compile(compiled_model, backend="eager", fullgraph=fullgraph)
        self.assertEqual(compiled(x), expected)
        self.assertEqual(state(compiled_model), state(eager_model))


class HopModuleMutationErrorTests(HopModuleMutationTestCase):
    def assertModuleMutationBreak(self, model, hop, form, change=None, inner=None):
        before = state(model)
        _, form_change, class_name = FORMS[form]
        change = change or form_change
        explanation = (
            f"Attempted to {change} nn.Module {class_name}, which was "
            "created outside of this HigherOrderOp's body."
        )
        compiled = torch.compile(model, backend="eager", fullgraph=True)
        if hop in ("map", "cond", "while_loop"):
            # Their body is speculated: its graph break is wrapped.
            with self.assertRaises(UncapturedHigherOrderOpError) as cm:
                compiled(make_input(hop, inner))
            self.assertIn(f"{GB_TYPE}\n", str(cm.exception))
        else:
            with self.assertRaises(Unsupported) as cm:
                compiled(make_input(hop, inner))
            self.assertEqual(cm.exception.gb_type, GB_TYPE)
        self.assertIn(f"Explanation: {explanation}", str(cm.exception))
        if hop != "checkpoint":
            self.assertNotIn(CHECKPOINT_CONFIG, str(cm.exception))
        self.assertEqual(state(model), before)
        return str(cm.exception)

    @parametrize("form", list(ATTRIBUTE_FORMS))
    def test_attribute_mutation_breaks(self, form):
        self.assertModuleMutationBreak(Model("map", form), "map", form)

    @parametrize("form", list(DICT_FORMS))
    def test_dict_mutation_breaks(self, form):
        self.assertModuleMutationBreak(Model("map", form), "map", form)

    def test_iterator_module_dict_mutation_breaks(self):
        # A module taken from an iterator, whose source Dynamo builds for guards
        # only, is found among the modules the trace holds.
        def f(x, it):
            m = next(it)

            def body(t):
                m.register_buffer("extra", torch.ones(2))
                return t + 1

            return control_flow_map(body, x)

        m = torch.nn.Identity()
        compiled = torch.compile(f, backend="eager", fullgraph=True)
        with self.assertRaises(UncapturedHigherOrderOpError) as cm:
            compiled(torch.ones(3, 2), iter((m,)))
        self.assertIn(
            "Explanation: Attempted to change the _buffers of nn.Module Identity",
            str(cm.exception),
        )
        self.assertEqual(dict(m._buffers), {})

    def test_frame_module_dict_mutation_breaks(self):
        # Its _modules is found where its __init__ stored it.
        model = FrameModel("map", "append_module_list")
        self.assertModuleMutationBreak(model, "map", "append_module_list")

    @parametrize("form", ["setitem_layers_vars", "setitem_layers_dunder_dict"])
    def test_frame_module_dunder_dict_mutation_breaks(self, form):
        # Its __dict__ is found through the module it belongs to.
        model = FrameModel("while_loop", form)
        self.assertModuleMutationBreak(model, "while_loop", form)

    def test_dict_names_the_module_owning_it(self):
        # The body reaches Model's _buffers through lin, which holds it as a
        # plain attribute: the break names Model, whose own dict it is.
        model = Model("map", "setitem_buffers_through_lin")
        model.lin.owner_buffers = model._buffers
        model.torchdynamo_force_dynamic = False
        self.assertModuleMutationBreak(model, "map", "setitem_buffers_through_lin")

    @parametrize("hop", list(HOPS))
    def test_mutation_breaks_in_each_hop(self, hop):
        self.assertModuleMutationBreak(Model(hop, "iadd"), hop, "iadd")

    def assertNNModuleVariableMutationBreak(self, hop, form):
        # Dynamo does not inline this module: it installs it in the graph as
        # it is (an NNModuleVariable), as it does for torch.export.
        model = Model(hop, form)
        model.torchdynamo_force_dynamic = False
        return self.assertModuleMutationBreak(model, hop, form)

    # Dynamo cannot trace `del` on such a module, even outside a HigherOrderOp.
    @parametrize("form", [form for form in ATTRIBUTE_FORMS if form != "delete_buffer"])
    def test_nn_module_variable_attribute_mutation_breaks(self, form):
        self.assertNNModuleVariableMutationBreak("map", form)

    @parametrize("form", list(DICT_FORMS))
    def test_nn_module_variable_dict_mutation_breaks(self, form):
        self.assertNNModuleVariableMutationBreak("map", form)

    def test_nn_module_variable_checkpoint_break_has_no_config_hint(self):
        # skip_fwd_side_effects_in_bwd_under_checkpoint does not allow it.
        message = self.assertNNModuleVariableMutationBreak("checkpoint", "set_int")
        self.assertNotIn(CHECKPOINT_CONFIG, message)

    def test_nested_hop_mutation_breaks(self):
        model = Model("cond", "set_int")
        model.hop = lambda body, x: HOPS["cond"](lambda t: control_flow_map(body, t), x)
        self.assertModuleMutationBreak(model, "cond", "set_int")

    @parametrize("inner", ["checkpoint", "nested_compile_region"])
    @parametrize("outer", ["checkpoint", "nested_compile_region"])
    @parametrize("form", ["set_tensor", "register_buffer", "setitem_buffers"])
    def test_mutation_in_allowing_hop_in_allowing_hop_matches_eager(
        self, outer, inner, form
    ):
        # The tensor the inner HigherOrderOp returns for the change, the outer
        # one returns too.
        model = Model(outer, form)
        model.hop = nest(outer, inner)
        with torch._dynamo.config.patch(
            skip_fwd_side_effects_in_bwd_under_checkpoint=True
        ):
            self.assertMatchesEager(model, outer)

    @parametrize("inner", list(ALLOWING_HOPS))
    @parametrize("outer", list(DISCARDING_HOPS))
    @parametrize(
        "form",
        [
            "set_tensor",
            "set_int",
            "register_buffer",
            "setitem_buffers",
            "setitem_dunder_dict",
        ],
    )
    def test_mutation_in_allowing_hop_in_discarding_hop_breaks(
        self, outer, inner, form
    ):
        # The outer HigherOrderOp would drop the change when its body ends: it
        # refuses it there, and the break names it.
        model = Model(outer, form)
        model.hop = nest(outer, inner)
        message = self.assertModuleMutationBreak(
            model, outer, form, NESTED_CHANGES.get(form), inner
        )
        self.assertIn(f"Higher Order Operator: {DISCARDING_HOPS[outer]}\n", message)

    @parametrize("outer", list(DISCARDING_HOPS))
    @parametrize("case", list(OTHER_DICT_CHANGES))
    def test_other_change_in_allowing_hop_in_discarding_hop_breaks(self, outer, case):
        # Other objects than a module's state too: none is dropped silently.
        f = other_change_program(nest(outer, "nested_compile_region"), case)
        self.addCleanup(reset_global_state)
        holder, m = Holder(), torch.nn.Identity()
        before = other_state(holder, m)
        compiled = torch.compile(f, backend="eager", fullgraph=True)
        with self.assertRaises(UncapturedHigherOrderOpError) as cm:
            compiled(torch.ones(2), holder, iter((m,)))
        self.assertIn("HOP: Unsafe side effect\n", str(cm.exception))
        self.assertIn(
            f"Higher Order Operator: {DISCARDING_HOPS[outer]}\n", str(cm.exception)
        )
        self.assertEqual(other_state(holder, m), before)

    @parametrize("outer", list(DISCARDING_HOPS))
    def test_iterator_module_in_allowing_hop_in_discarding_hop_breaks(self, outer):
        def f(x, it):
            m = next(it)

            def body(t):
                m.register_buffer("extra", torch.ones(2))
                return t + 1

            return nest(outer, "nested_compile_region")(body, x)

        m = torch.nn.Identity()
        compiled = torch.compile(f, backend="eager", fullgraph=True)
        with self.assertRaises(UncapturedHigherOrderOpError) as cm:
            compiled(torch.ones(3, 2), iter((m,)))
        self.assertIn(
            f"Higher Order Operator: {DISCARDING_HOPS[outer]}\n  Explanation: "
            "Attempted to change the _buffers of nn.Module Identity",
            str(cm.exception),
        )
        self.assertEqual(dict(m._buffers), {})

    def test_change_of_stored_attribute_in_allowing_hop_in_discarding_hop_breaks(
        self,
    ):
        # The root set the attribute before the HigherOrderOp: the body's
        # change of that value would be dropped.
        model = StoringModel("cond", "set_int")
        model.hop = nest("cond", "nested_compile_region")
        with self.assertRaises(UncapturedHigherOrderOpError) as cm:
            torch.compile(model, backend="eager", fullgraph=True)(make_input("cond"))
        self.assertIn(
            "Higher Order Operator: torch.cond\n  Explanation: Attempted to set "
            "attribute 'n' of nn.Module StoringModel",
            str(cm.exception),
        )
        self.assertEqual(model.n, 3)

    def test_undone_change_of_another_value_breaks(self):
        # Compiled where the store restores n, guarded on it: for another n the
        # same store changes it.
        model = Model("cond", "set_int")
        model.change = set_and_restore_int
        model.hop = nest("cond", "nested_compile_region")
        compiled = torch.compile(model, backend="eager", fullgraph=True)
        compiled(make_input("cond"))
        model.n = 4
        with self.assertRaises(UncapturedHigherOrderOpError) as cm:
            compiled(make_input("cond"))
        self.assertIn(
            "Attempted to set attribute 'n' of nn.Module Model", str(cm.exception)
        )
        self.assertEqual(model.n, 4)

    def test_global_in_allowing_hop_in_discarding_hop_breaks(self):
        model = Model("cond", "set_int")
        model.change = set_global
        model.hop = nest("cond", "nested_compile_region")
        with self.assertRaises(UncapturedHigherOrderOpError) as cm:
            torch.compile(model, backend="eager", fullgraph=True)(make_input("cond"))
        self.assertIn(
            "HOP: Unsafe side effect\n  Higher Order Operator: torch.cond",
            str(cm.exception),
        )
        self.assertEqual(GLOBAL_COUNT, 0)

    @parametrize("outer", list(DISCARDING_HOPS))
    def test_iterator_in_allowing_hop_in_discarding_hop_breaks(self, outer):
        # An iterator's position is no state the end of the body compares: an
        # advance counts as a change.
        def f(x):
            it = iter([1, 2, 3, 4])

            def body(t):
                return t + next(it)

            return nest(outer, "nested_compile_region")(body, x)

        with self.assertRaises(UncapturedHigherOrderOpError) as cm:
            torch.compile(f, backend="eager", fullgraph=True)(torch.ones(3, 2))
        self.assertIn(
            "HOP: Unsafe side effect\n"
            f"  Higher Order Operator: {DISCARDING_HOPS[outer]}",
            str(cm.exception),
        )

    @parametrize("outer", ["wrap", "checkpoint"])
    @parametrize("form", ["set_tensor", "register_buffer", "setitem_buffers"])
    def test_tensor_from_allowing_hop_in_wrap_breaks(self, outer, form):
        # wrap and checkpoint keep a nested HigherOrderOp's side effects, but do
        # not return the tensor computed in their body that the change stores.
        model = Model(outer, form)
        model.hop = nest(outer, "nested_compile_region")
        message = self.assertModuleMutationBreak(
            model, outer, form, NESTED_CHANGES.get(form)
        )
        if outer == "checkpoint":
            # With skip_fwd_side_effects_in_bwd_under_checkpoint it compiles.
            self.assertIn(CHECKPOINT_CONFIG, message)

    def test_tensor_from_allowing_hop_in_wrap_falls_back(self):
        # Without fullgraph the wrap falls back to eager, the change included.
        model = Model("wrap", "set_tensor")
        model.hop = nest("wrap", "autograd_function")
        self.assertMatchesEager(model, "autograd_function", fullgraph=False)

    def assertBreakHintsAtCheckpointConfig(self, form):
        message = self.assertModuleMutationBreak(
            Model("checkpoint", form), "checkpoint", form
        )
        self.assertIn(CHECKPOINT_CONFIG, message)

    @parametrize("form", ["iadd", "set_int"])
    def test_checkpoint_attribute_break_hints_at_config(self, form):
        self.assertBreakHintsAtCheckpointConfig(form)

    def test_checkpoint_dict_break_hints_at_config(self):
        self.assertBreakHintsAtCheckpointConfig("register_buffer")


class HopModuleMutationControlTests(HopModuleMutationTestCase):
    # An existing gap: an autograd.Function's forward runs under no_grad in
    # eager, so a tensor it stores on the module does not require grad;
    # compiled, it does, with the Function's backward as its grad_fn.
    @decorateIf(
        unittest.expectedFailure,
        lambda params: (
            params["hop"] == "autograd_function" and params["form"] != "set_int"
        ),
    )
    @parametrize("hop", list(ALLOWING_HOPS))
    @parametrize("form", ["set_tensor", "set_int", "register_buffer"])
    def test_allowing_hop_mutation_matches_eager(self, hop, form):
        self.assertMatchesEager(Model(hop, form), hop)

    @parametrize(
        "form",
        [
            "set_tensor",
            "set_int",
            "delete_buffer",
            "register_buffer",
            "setitem_buffers",
            "setitem_dunder_dict",
        ],
    )
    def test_checkpoint_mutation_allowed_by_config(self, form):
        with torch._dynamo.config.patch(
            skip_fwd_side_effects_in_bwd_under_checkpoint=True
        ):
            self.assertMatchesEager(Model("checkpoint", form), "checkpoint")

    def test_object_from_ended_body_matches_eager(self):
        # An object created in a body nested in one that has ended, changed in
        # another body: that body returns the tensor it stores.
        class Box:
            pass

        holder = Box()

        @torch.compiler.nested_compile_region
        def make_box(x):
            holder.box = Box()
            return x.sin()

        @torch.compiler.nested_compile_region
        def fill_box(x):
            holder.box.v = x.cos()
            return x + 1

        def f(x):
            return fill_box(wrap(make_box, x)), holder.box.v * 2

        x = make_input("nested_compile_region")
        expected = f(x)
        self.assertEqual(torch.compile(f, backend="eager", fullgraph=True)(x), expected)
        self.assertEqual(holder.box.v, expected[1] / 2)

    @parametrize("outer", list(DISCARDING_HOPS))
    @parametrize(
        "change",
        [
            set_and_restore_int,
            set_and_restore_read_int,
            set_and_restore_dunder_dict_int,
            set_and_restore_int_through_dunder_dict,
            set_tensor_and_restore_int,
            set_and_delete_new_attribute,
            set_and_restore_function,
            set_and_delete_frame_module_attribute,
        ],
        name_fn=lambda change: change.__name__,
    )
    def test_undone_change_in_allowing_hop_in_discarding_hop_matches_eager(
        self, outer, change
    ):
        # Nothing is left to drop when the outer body ends, as in one body.
        model = (
            FrameModel if change is set_and_delete_frame_module_attribute else Model
        )(outer, "set_int")
        model.change = change
        model.hop = nest(outer, "nested_compile_region")
        self.assertMatchesEager(model, outer)

    @parametrize("outer", list(DISCARDING_HOPS))
    def test_undone_change_of_each_kind_in_discarding_hop_matches_eager(self, outer):
        lst, items, members, count = [], [1], {1, 2}, 0

        def body(t):
            global GLOBAL_COUNT
            nonlocal count, lst
            lst.append(t)
            lst.pop()
            lst.extend([t])
            lst.pop()
            lst += [t]
            lst.pop()
            items[0] = 5
            items[0] = 1
            members.discard(1)
            members.add(1)
            count = 5
            count = 0
            Flag.on = True
            Flag.on = False
            Flag.level = 0.0
            Flag.level = math.nan
            GLOBAL_COUNT = 5
            GLOBAL_COUNT = 0
            return t + 1

        def f(x):
            return nest(outer, "nested_compile_region")(body, x)

        x = make_input(outer)
        self.assertEqual(torch.compile(f, backend="eager", fullgraph=True)(x), f(x))
        self.assertEqual(
            (lst, items, members, count, Flag.on, GLOBAL_COUNT),
            ([], [1], {1, 2}, 0, False, 0),
        )
        self.assertTrue(math.isnan(Flag.level))

    @parametrize("outer", list(DISCARDING_HOPS))
    def test_undone_global_of_another_module_in_discarding_hop_matches_eager(
        self, outer
    ):
        # The body's function is of another module than the compiled frame.
        module = types.ModuleType("_hop_mutation_other_module")
        exec(
            "COUNT = 0\n"
            "def body(t):\n"
            "    global COUNT\n"
            "    count = COUNT\n"
            "    COUNT = 5\n"
            "    COUNT = count\n"
            "    return t + 1\n",
            vars(module),
        )
        sys.modules[module.__name__] = module
        self.addCleanup(sys.modules.pop, module.__name__)

        def f(x):
            return nest(outer, "nested_compile_region")(module.body, x)

        x = make_input(outer)
        self.assertEqual(torch.compile(f, backend="eager", fullgraph=True)(x), f(x))
        self.assertEqual(module.COUNT, 0)

    @parametrize("in_wrap", [False, True])
    @parametrize("outer", list(DISCARDING_HOPS))
    def test_restore_around_allowing_hop_in_discarding_hop_matches_eager(
        self, outer, in_wrap
    ):
        # The body's own stores (or, in_wrap, a wrap's in it), which a deferred
        # check lets through, come before the nested change: the end of the
        # body compares with the state before the body, not with theirs.
        m, linear = torch.nn.Module(), torch.nn.Linear(2, 2)
        m.mode = "x"

        @torch.compiler.nested_compile_region
        def region(t):
            m.mode = "b"
            m.mode = "a"
            linear.train()
            linear.eval()
            return t + 1

        def body(t):
            m.mode = "a"
            linear.eval()
            out = region(t)
            m.mode = "x"
            linear.train()
            return out

        def f(x):
            return HOPS[outer](lambda t: wrap(body, t) if in_wrap else body(t), x)

        x = make_input(outer)
        self.assertEqual(torch.compile(f, backend="eager", fullgraph=True)(x), f(x))
        self.assertEqual((m.mode, linear.training), ("x", True))

    @parametrize("outer", ["wrap", "checkpoint"])
    def test_returned_tensor_from_allowing_hop_in_wrap_matches_eager(self, outer):
        # The body returns the tensor the change stores: the outer graph has it.
        class Returning(Model):
            def forward(self, x):
                def body(t):
                    self.buf = t.sin()
                    return self.buf

                return self.hop(body, x)

        model = Returning(outer, "set_int")
        model.hop = nest(outer, "nested_compile_region")
        self.assertMatchesEager(model, outer)

    def test_constant_in_allowing_hop_in_wrap_adds_no_guard(self):
        # The body does not read the attribute it sets: no guard on its value.
        model = Model("wrap", "set_int")
        model.hop = nest("wrap", "nested_compile_region")
        counter = torch._dynamo.testing.CompileCounter()
        compiled = torch.compile(model, backend=counter, fullgraph=True)
        for n in (3, 4):
            model.n = n
            compiled(make_input("wrap"))
        self.assertEqual(counter.frame_count, 1)

    @parametrize("inner", [*ALLOWING_HOPS, "checkpoint"])
    @parametrize("outer", ["wrap", "checkpoint"])
    def test_constant_in_allowing_hop_in_wrap_matches_eager(self, outer, inner):
        # wrap and checkpoint keep the side effects of a nested HigherOrderOp
        # (checkpoint allows them with the config, an outer one does not).
        model = Model(outer, "set_int")
        model.hop = nest(outer, inner)
        with torch._dynamo.config.patch(
            skip_fwd_side_effects_in_bwd_under_checkpoint=inner == "checkpoint"
        ):
            self.assertMatchesEager(model, inner)

    @parametrize(
        "outer,inner",
        [
            ("wrap", "wrap"),
            ("checkpoint", "wrap"),
            ("wrap", "checkpoint"),
            ("cond", "map"),
            ("map", "nested_compile_region"),
            ("cond", "nested_compile_region"),
        ],
    )
    def test_functional_call_in_nested_hops_matches_eager(self, outer, inner):
        # Reparametrization swaps the parameters of the module's submodules in
        # and back: nothing is changed when a body ends.
        model = Inner()
        weights = dict(model.named_parameters())
        params = {k: v.detach() + 1 for k, v in weights.items()}

        def f(x):
            def body(t):
                return torch.func.functional_call(model, params, (t,))

            return nest(outer, inner)(body, x)

        x = make_input(outer)
        self.assertEqual(torch.compile(f, backend="eager", fullgraph=True)(x), f(x))
        self.assertEqual(dict(model.named_parameters()), weights)

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

    @parametrize("case", list(OTHER_DICT_CHANGES))
    def test_other_dict_change_keeps_unsafe_side_effect_break(self, case):
        f = other_change_program(wrap, case)
        self.addCleanup(reset_global_state)
        with self.assertRaises(Unsupported) as cm:
            compiled = torch.compile(f, backend="eager", fullgraph=True)
            compiled(torch.ones(2), Holder(), iter((torch.nn.Identity(),)))
        self.assertEqual(cm.exception.gb_type, "HOP: Unsafe side effect")
        # Without fullgraph the HOP falls back to eager, the change included.
        compiled = torch.compile(f, backend="eager")
        self.assertEqual(run_other_change(compiled), run_other_change(f))


instantiate_parametrized_tests(HopModuleMutationErrorTests)
instantiate_parametrized_tests(HopModuleMutationControlTests)


if __name__ == "__main__":
    from torch._dynamo.test_case import run_tests

    run_tests()
