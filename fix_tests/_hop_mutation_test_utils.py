# Owner(s): ["module: dynamo"]
"""
Helpers of the tests of nn.Module mutation inside a HigherOrderOp body
(test_hop_mutation*.py): the issue's reproducer, the HigherOrderOps and the
forms of the mutation under test, the modules they mutate, and the
assertions the tests share.
"""

import functools
import json
import re
from pathlib import Path

import torch
import torch._dynamo.test_case
import torch.utils.checkpoint
from functorch.experimental.control_flow import map as control_flow_map
from torch._dynamo.exc import (
    InternalTorchDynamoError,
    UncapturedHigherOrderOpError,
    Unsupported,
)
from torch._higher_order_ops.while_loop import while_loop
from torch._higher_order_ops.wrap import wrap

GB_TYPE = "nn.Module mutation in HigherOrderOp"
ALIASED_GB_TYPE = "HOP: aliased intermediate used outside the subgraph"


class Issue126355(torch.nn.Module):
    """The reproducer of https://github.com/pytorch/pytorch/issues/126355."""

    def __init__(self):
        super().__init__()
        self.w = torch.tensor(1)

    def forward(self, xs):
        def body(x):
            self.w += 1
            return x

        return control_flow_map(body, xs)


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


def _map_in_cond(body, x):
    return _cond(lambda t: control_flow_map(body, t), x)


def _call_inside(wrapping, hop, body, x):
    """hop(body, x), called from the body of HOPS[wrapping]."""
    return HOPS[wrapping](lambda t: hop(body, t), x)


# Each calls its body once or more on a (3, 2) tensor; the body returns t + 1.
# A test file adds the HigherOrderOps that only its releases have.
HOPS = {
    "map": control_flow_map,
    "cond": _cond,
    "while_loop": _while_loop,
    "wrap": wrap,
    "checkpoint": _checkpoint,
    "autograd_function": _autograd_function,
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


def _register_buffer(m):
    m.register_buffer("buf2", torch.ones(1))


def _register_parameter(m):
    m.register_parameter("p2", None)


def _add_module(m):
    m.add_module("extra", torch.nn.Identity())


def _register_module(m):
    m.register_module("extra", torch.nn.Identity())


def _module_list_append(m):
    m.layers.append(torch.nn.Identity())


def _module_list_extend(m):
    m.layers.extend([torch.nn.Identity()])


def _module_list_insert(m):
    m.layers.insert(0, torch.nn.Identity())


def _module_list_setitem(m):
    m.layers[0] = torch.nn.ReLU()


def _module_list_delitem(m):
    del m.layers[0]


def _module_list_pop(m):
    m.layers.pop(0)


def _module_dict_setitem(m):
    m.named["b"] = torch.nn.ReLU()


def _module_dict_pop(m):
    m.named.pop("a")


def _sequential_append(m):
    m.seq.append(torch.nn.ReLU())


def _dunder_dict_setitem(m):
    m.__dict__["n"] = 11


def _dunder_dict_delitem(m):
    del m.__dict__["n"]


def _buffers_setitem(m):
    m._buffers["buf"] = torch.ones(1)


def _buffers_delitem(m):
    del m._buffers["buf"]


def _parameters_setitem(m):
    m._parameters["p"] = None


def _modules_setitem(m):
    m._modules["extra"] = torch.nn.ReLU()


def _modules_pop(m):
    m._modules.pop("seq")


def _train(m):
    m.train(False)


def inlines_modules():
    """Whether Dynamo inlines nn.Modules here (UnspecializedNNModuleVariable);
    from 2.12 it always does."""
    return (
        torch.__version__ >= (2, 12) or torch._dynamo.config.inline_inbuilt_nn_modules
    )


# 2.12 traces a module's __dict__ as a dict of its own (DunderDictVariable);
# before, a write to it is a store of the attribute.
_DUNDER_DICT_SET = (
    "change the __dict__ of" if torch.__version__ >= (2, 12) else "set attribute 'n' of"
)

# Changes to a module's state through nn.Module's methods, its container
# modules and its own dicts: name -> (mutation, what the break says the body
# did, the class of the module it names). Each ends in a write to the module's __dict__, _parameters,
# _buffers or _modules, or in its __setattr__ or __delattr__.
STATE_MUTATIONS = {
    "register_buffer": (_register_buffer, "change the _buffers of", "StateModel"),
    "register_parameter": (
        _register_parameter,
        "change the _parameters of",
        "StateModel",
    ),
    "add_module": (_add_module, "change the _modules of", "StateModel"),
    "register_module": (_register_module, "change the _modules of", "StateModel"),
    "module_list_append": (_module_list_append, "change the _modules of", "ModuleList"),
    "module_list_extend": (_module_list_extend, "change the _modules of", "ModuleList"),
    "module_list_insert": (_module_list_insert, "change the _modules of", "ModuleList"),
    "module_list_setitem": (
        _module_list_setitem,
        "set attribute '0' of",
        "ModuleList",
    ),
    "module_list_delitem": (
        _module_list_delitem,
        "delete attribute '0' of",
        "ModuleList",
    ),
    "module_list_pop": (
        _module_list_pop,
        "delete attribute '0' of",
        "ModuleList",
    ),
    "module_dict_setitem": (
        _module_dict_setitem,
        "change the _modules of",
        "ModuleDict",
    ),
    "module_dict_pop": (
        _module_dict_pop,
        "change the _modules of",
        "ModuleDict",
    ),
    "sequential_append": (_sequential_append, "change the _modules of", "Sequential"),
    "dunder_dict_setitem": (_dunder_dict_setitem, _DUNDER_DICT_SET, "StateModel"),
    "dunder_dict_delitem": (
        _dunder_dict_delitem,
        "change the __dict__ of",
        "StateModel",
    ),
    "buffers_setitem": (_buffers_setitem, "change the _buffers of", "StateModel"),
    "buffers_delitem": (_buffers_delitem, "change the _buffers of", "StateModel"),
    "parameters_setitem": (
        _parameters_setitem,
        "change the _parameters of",
        "StateModel",
    ),
    "modules_setitem": (_modules_setitem, "change the _modules of", "StateModel"),
    "modules_pop": (_modules_pop, "change the _modules of", "StateModel"),
    "train": (_train, "set attribute 'training' of", "StateModel"),
}

# Item assignment and deletion on a container module.
_CONTAINER_ITEM_MUTATIONS = (
    "module_list_setitem",
    "module_list_delitem",
    "module_list_pop",
    "module_dict_setitem",
    "module_dict_pop",
)


UNTRACED_GB_TYPES = (
    "Unsupported method call",
    "Unsupported __setitem__/__setattr__ inline attempt",
    "UnspecializedNNModuleVariable missing method",
)


def untraced_at_root(mutation, inlined=None):
    """Whether this Dynamo (before 2.12, with inlining on or off: by default
    this process's mode) does not trace the mutation even at the root, so
    that in a HigherOrderOp body it keeps Dynamo's own error, which the fix
    does not describe: with inlining off (every module an NNModuleVariable),
    object.__setattr__ of an attribute, item assignment and deletion on a
    container module, and from 2.8 del and delattr(); with inlining on, on
    2.8 only, del and delattr() (and so a ModuleList's item deletion); in
    both modes, `del` of a key of a module's __dict__, and before 2.7 a
    write to one."""
    if torch.__version__ >= (2, 12):
        return False
    if inlined is None:
        inlined = inlines_modules()
    if mutation == "dunder_dict_delitem":
        return True
    if mutation == "dunder_dict_setitem":
        return torch.__version__ < (2, 7)
    deletes = mutation in MUTATIONS and MUTATIONS[mutation][2]
    if not inlined:
        return (
            mutation == "object_setattr"
            or mutation in _CONTAINER_ITEM_MUTATIONS
            or (deletes and torch.__version__ >= (2, 8))
        )
    return (2, 8) <= torch.__version__ < (2, 9) and (
        deletes or mutation in ("module_list_delitem", "module_list_pop")
    )


# Each state mutation once, in the refusing HigherOrderOps in turn.
STATE_CASES = tuple(
    (REFUSING_HOPS[i % len(REFUSING_HOPS)], mutation)
    for i, mutation in enumerate(STATE_MUTATIONS)
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


def mutates_global_leaf(hop):
    """A function whose HOPS[hop] body mutates a module reached through a
    global rather than through self."""

    def fn(x):
        def body(t):
            GLOBAL_LEAF.n = GLOBAL_LEAF.n + 1
            return t + 1

        return HOPS[hop](body, x)

    return fn


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


class StateModel(torch.nn.Module):
    """A module with state of every kind, and container submodules, that
    STATE_MUTATIONS[mutation] changes in the body of HOPS[hop] (at the root,
    for hop "root")."""

    def __init__(self, hop, mutation):
        super().__init__()
        _add_state(self)
        self.layers = torch.nn.ModuleList([torch.nn.Identity(), torch.nn.Identity()])
        self.named = torch.nn.ModuleDict({"a": torch.nn.Identity()})
        self.seq = torch.nn.Sequential(torch.nn.Identity())
        self.hop = hop
        self.mutate = STATE_MUTATIONS[mutation][0]

    def forward(self, x):
        def body(t):
            self.mutate(self)
            return t + 1

        if self.hop == "root":
            return body(x)
        return HOPS[self.hop](body, x)


def state_of(model):
    """What a state mutation can change, for every module of the model: the
    keys of its own dicts, its attributes' values and its training flag."""
    state = {}
    for name, m in model.named_modules():
        for field in ("_parameters", "_buffers", "_modules"):
            state[f"{name}.{field}"] = list(getattr(m, field))
        state[f"{name}.__dict__"] = sorted(k for k in vars(m) if k[0] != "_")
        state[f"{name}.n"] = getattr(m, "n", "<absent>")
        state[f"{name}.training"] = m.training
        state[f"{name}.types"] = [type(c) for c in m.children()]
    return state


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
    """Creates a module inside the body of HOPS[hop] and mutates it there
    (and deletes one of its attributes, where `deletes`)."""

    def __init__(self, hop, deletes=True):
        super().__init__()
        self.hop = HOPS[hop]
        self.deletes = deletes

    def forward(self, x):
        def body(t):
            m = Scratch()
            m.w = m.w + 1
            m.n = 3
            m.created = 2
            if self.deletes:
                del m.n
            return t + m.w + m.created

        return self.hop(body, x)


class Transformed(torch.nn.Module):
    """Mutates itself in the body of a torch.func transform."""

    def __init__(self, transform):
        super().__init__()
        _add_state(self)
        self.transform = getattr(torch.func, transform)

    def forward(self, x):
        def body(t):
            self.n = self.n + 1
            self.w = self.w + 1
            return (t * t).sum()

        return self.transform(body)(x)


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


# From 2.11 the break says what the body did to which module, and leaves the
# HigherOrderOp's name to Dynamo, which appends it to every error raised in
# a HigherOrderOp body; before, the explanation named the HigherOrderOp.
NAMES_HOP = torch.__version__ < (2, 11)


def expected_module_explanation(hop, mutation, class_name):
    """The start of the break's explanation, `mutation` saying what the body
    did ("set attribute 'w' of")."""
    if NAMES_HOP:
        return f"Attempted to {mutation} nn.Module {class_name} inside the body of {HOP_NAMES[hop]}."
    return (
        f"Attempted to {mutation} nn.Module {class_name}, which was created "
        "outside of this HigherOrderOp's body."
    )


def expected_explanation(hop, mutation, target):
    _, attr, deletes = MUTATIONS[mutation]
    action = "delete" if deletes else "set"
    return expected_module_explanation(
        hop, f"{action} attribute '{attr}' of", class_name(target)
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

    def assertBreakMatchesRegistry(self, hop, mutation):
        # The newest entry of its gb_type in graph_break_registry.json
        # documents the break of mutation (on self, in hop) as it is raised.
        error = compile_error(Model(hop, mutation, "self"), make_input(hop))
        gb_type, explanation = graph_break(error)
        entry = registry_entry(gb_type)
        pattern = "".join(
            ".*" if part.startswith("{") else re.escape(part)
            for part in re.split(r"(\{[^}]*\})", entry["Explanation"])
        )
        self.assertRegex(explanation, f"^{pattern}$")
        for hint in entry["Hints"]:
            self.assertIn(hint.strip(), str(error))

    def assertOuterPlainObjectNewAttributeBreaks(self, hop):
        # Not a module: the generic break of HOPS[hop], instead of the repr
        # of the AttributeError Dynamo hit while looking for the old value.
        class Config:
            pass

        config = Config()

        def fn(x):
            def body(t):
                config.fresh = 1
                return t + 1

            return HOPS[hop](body, x)

        error = compile_error(fn, make_input(hop))
        self.assertEqual(graph_break(error)[0], "HOP: Unsafe side effect")
        self.assertFalse(hasattr(config, "fresh"))

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
        self.assertIn(
            "return the new value from the body"
            if NAMES_HOP
            else "return it from the body",
            message,
        )
        self.assertEqual(
            "skip_fwd_side_effects_in_bwd_under_checkpoint" in message, shown
        )
        self.assertNotIn("fundamental", message)

    def assertFullgraphMatchesEager(self, model_fn, x, state=module_state):
        eager_model, compiled_model = model_fn(), model_fn()
        expected = eager_model(x)
        torch._dynamo.reset()
        actual = torch.compile(compiled_model, backend="eager", fullgraph=True)(x)
        self.assertEqual(actual, expected)
        self.assertEqual(state(compiled_model), state(eager_model))

    def assertStateMutationBreak(self, error, hop, mutation):
        _, what, class_name = STATE_MUTATIONS[mutation]
        gb_type, explanation = graph_break(error)
        self.assertEqual(gb_type, GB_TYPE, msg=str(error))
        self.assertTrue(
            explanation.startswith(expected_module_explanation(hop, what, class_name)),
            msg=explanation,
        )

    def assertFallbackMatchesEager(self, model_fn, x, state=module_state):
        eager_model, compiled_model = model_fn(), model_fn()
        torch._dynamo.reset()
        compiled = run(torch.compile(compiled_model, backend="eager"), x)
        expected = run(eager_model, x)
        self.assertEqual(compiled[0], expected[0], msg=f"{compiled} != {expected}")
        if expected[0] == "raises":
            self.assertIs(compiled[1], expected[1])
        else:
            self.assertEqual(compiled[1], expected[1])
        self.assertEqual(state(compiled_model), state(eager_model))
