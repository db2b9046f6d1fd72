# Owner(s): ["module: dynamo"]
"""
A property of the fix, over nestings of two HigherOrderOps: a body that
changes the state of a module created outside both (each form of the pull
request's test_hop_mutation.py) behaves like plain Python, or is the one graph
break, "nn.Module mutation in HigherOrderOp", with the module unchanged. Never
a normal return with the change lost, and never an internal error.

A case is a nesting (outer, inner, each of map, cond, while_loop, wrap,
checkpoint, autograd.Function and nested_compile_region; checkpoint with or
without skip_fwd_side_effects_in_bwd_under_checkpoint), a form (each of the
pull request's, register_buffer on a module reached through an iterator,
and a change of a global list, dict or object), and a route:
torch.compile with fullgraph=True or False, or eager, where map, cond and
while_loop compile their own bodies. The body that refuses the change:

- the inner HigherOrderOp's, where it refuses side effects (map, cond,
  while_loop, wrap, checkpoint without the config), at the change;
- else the outer one's, at its end, where it throws its side effects away
  (map, cond, while_loop), or where it refuses side effects and the change
  stores a tensor computed in the body (wrap, checkpoint without the config:
  they keep side effects but return no intermediates);
- else none.

The expected outcome:

- where a body refuses the change, in a route that traces it (compiled;
  eager, inside map, cond or while_loop), the break: "nn.Module mutation in
  HigherOrderOp" naming the change (as the outer body's end sees it, see
  test_hop_mutation.NESTED_CHANGES) for a module, "HOP: Unsafe side effect"
  (or "HOP: Non-nullified side effect") for another object, with the state
  unchanged; with fullgraph=False, only where a HigherOrderOp that cannot
  fall back to eager (map, cond, while_loop, nested_compile_region) is, from
  that body outward: elsewhere the break falls back to eager;
- otherwise, the result and the state of plain Python, where each
  HigherOrderOp is a call of its body (map: once a row; while_loop: twice),
  or the error plain Python raises (delete_buffer, run twice by map).
  Tensors are compared by value: an autograd.Function's forward runs under
  no_grad in eager only (see test_allowing_hop_mutation_matches_eager). A
  nesting may give the graph break of an aliased intermediate instead (`self.w
  += 1` in an autograd.Function's forward, which returns a view of the
  module's parameter), where no body throws the change away: then
  fullgraph=False falls back to plain Python's result.

A nesting that fails for a body that changes nothing, in the same route, is
upstream's limitation, not the fix's (cond, map or while_loop in checkpoint:
"There was no rule registered for HigherOrderOperator cond and mode
_CachingTorchDispatchMode"): such a case is skipped, and counted.

The controls: a body that changes only a module it creates, and
torch.func.functional_call (whose reparametrization swaps the parameters of
the module's submodules in and back), behave like plain Python in every
nesting and route, patched and pristine.

The examples are derandomized and bounded; HOP_MUTATION_PROPERTY_EXAMPLES=N
draws N at random instead (make property).
"""

import collections
import copy
import os

import torch
import torch._dynamo.test_case
from hypothesis import HealthCheck, assume, given, settings, strategies as st
from test_hop_mutation import (
    ALLOWING_HOPS,
    DISCARDING_HOPS,
    FORMS,
    GB_TYPE,
    HOPS,
    NESTED_CHANGES,
    FrameModel,
    Inner,
    Model,
)
from torch._dynamo.exc import UncapturedHigherOrderOpError

EXAMPLES = int(os.environ.get("HOP_MUTATION_PROPERTY_EXAMPLES", "0"))
CHECKPOINT_CONFIG = "skip_fwd_side_effects_in_bwd_under_checkpoint"

# Each HigherOrderOp as plain Python: a call of its body, as in HOPS.
PLAIN_HOPS = {
    "map": lambda body, x: torch.stack([body(t) for t in x]),
    "cond": lambda body, x: body(x) if x.sum() > 0 else x + 1,
    "while_loop": lambda body, x: body(body(x)),
    "wrap": lambda body, x: body(x),
    "checkpoint": lambda body, x: body(x),
    "autograd_function": lambda body, x: body(x),
    "nested_compile_region": lambda body, x: body(x),
}
ALL_HOPS = {**HOPS, **ALLOWING_HOPS}
# Their eager path compiles their body, and a break in it cannot fall back.
COMPILES_IN_EAGER = {"map", "cond", "while_loop"}
NO_FALLBACK = COMPILES_IN_EAGER | {"nested_compile_region"}
ROUTES = ("fullgraph", "graph_breaks", "eager")
ALIASED_GB_TYPE = "HOP: aliased intermediate used outside the subgraph"
# The forms of the ModuleList FrameModel creates in the compiled frame.
FRAME_FORMS = {"setitem_layers_vars", "setitem_layers_dunder_dict"}
# A module the body reaches through an iterator (of Model.layers).
MODULE_FORMS = {
    **FORMS,
    "iterator_module": (
        lambda m: next(iter(m.layers)).register_buffer("extra", torch.ones(2)),
        "change the _buffers of",
        "Identity",
    ),
}
# The forms that store a tensor computed in the body.
TENSOR_FORMS = {
    "iadd",
    "iterator_module",
    "register_buffer",
    "register_buffer_submodule",
    "set_tensor",
    "setitem_buffers",
    "setitem_buffers_through_lin",
}


class Obj:
    pass


GLOBAL_LIST, GLOBAL_DICT, GLOBAL_OBJ = [], {}, Obj()
# Changes of objects from outside the body that are no module's state.
OTHER_FORMS = {
    "global_list_append": lambda m: GLOBAL_LIST.append(1),
    "global_dict_setitem": lambda m: GLOBAL_DICT.update(k=1),
    "global_obj_setattr": lambda m: setattr(GLOBAL_OBJ, "v", 1),
}
OTHER_GB_TYPES = {"HOP: Unsafe side effect", "HOP: Non-nullified side effect"}


def refuses(hop, config):
    return hop in HOPS and not (hop == "checkpoint" and config)


def refuser(outer, inner, config, form):
    """The HigherOrderOp whose body refuses the change, or None."""
    if refuses(inner, config):
        return inner
    if outer in DISCARDING_HOPS:
        return outer
    if refuses(outer, config) and form in TENSOR_FORMS:
        return outer
    return None


def nested(hops, outer, inner):
    return lambda body, x: hops[outer](lambda t: hops[inner](body, t), x)


def build(outer, inner, form, hops=ALL_HOPS):
    model = (FrameModel if form in FRAME_FORMS else Model)(
        "wrap", form if form in FORMS else "set_int"
    )
    if form in OTHER_FORMS:
        model.change = OTHER_FORMS[form]
    elif form not in FORMS:
        model.change = MODULE_FORMS[form][0]
    # The module setitem_buffers_through_lin reaches Model's _buffers through.
    model.lin.owner_buffers = model._buffers
    model.hop = nested(hops, outer, inner)
    return model


def values(model):
    """The state test_hop_mutation.state() compares, tensors by value."""
    return (
        {k: v.detach().clone() for k, v in model._parameters.items()},
        {k: v.detach().clone() for k, v in model._buffers.items()},
        {k: type(v) for k, v in model._modules.items()},
        [type(m) for m in model.layers],
        {k: v.detach().clone() for k, v in model.lin._buffers.items()},
        list(model.layers[0]._buffers),
        model.n,
        "fresh" in vars(model),
        vars(model.layers).get("n"),
        model.training,
        list(GLOBAL_LIST),
        dict(GLOBAL_DICT),
        dict(vars(GLOBAL_OBJ)),
    )


def reset_globals():
    GLOBAL_LIST.clear()
    GLOBAL_DICT.clear()
    vars(GLOBAL_OBJ).clear()


def make_input(outer, inner):
    # Positive, so that cond takes its body; rows of rows, for map in map.
    x = torch.rand(3, 2, 2) + 0.1
    return x.requires_grad_("autograd_function" in (outer, inner))


def run(model, x, route):
    if route == "eager":
        return model(x)
    fullgraph = route == "fullgraph"
    return torch.compile(model, backend="eager", fullgraph=fullgraph)(x)


_upstream_failures = {}


def fails_upstream(outer, inner, config, route):
    """Whether the nesting fails, in this route, for a body that changes
    nothing (or plain Python fails for it), or, without fullgraph, fails
    with an error other than a graph break for a body that graph breaks
    (torch._dynamo.graph_break() in an autograd.Function's forward in a
    cond: "Please convert all Tensors to FakeTensors first"): upstream's,
    not the fix's."""
    key = (outer, inner, config, route)
    if key not in _upstream_failures:
        x = make_input(outer, inner)
        model = build(outer, inner, "set_int")
        model.change = lambda m: None
        breaking = build(outer, inner, "set_int")
        breaking.change = lambda m: torch._dynamo.graph_break()
        try:
            build(outer, inner, "set_int", PLAIN_HOPS)(x)
            torch._dynamo.reset()
            run(model, x, route)
            _upstream_failures[key] = False
        except Exception:
            _upstream_failures[key] = True
        if route == "graph_breaks" and not _upstream_failures[key]:
            try:
                torch._dynamo.reset()
                run(breaking, x, route)
            except (torch._dynamo.exc.Unsupported, UncapturedHigherOrderOpError):
                pass
            except Exception:
                _upstream_failures[key] = True
    return _upstream_failures[key]


def examples(default):
    return settings(
        max_examples=EXAMPLES or default,
        derandomize=not EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
    )


class HopModuleMutationPropertyTestCase(torch._dynamo.test_case.TestCase):
    outcomes: collections.Counter  # each subclass's own

    @classmethod
    def tearDownClass(cls):
        print(f"\n{cls.__name__} outcomes: {dict(sorted(cls.outcomes.items()))}")
        super().tearDownClass()


class HopModuleMutationErrorTests(HopModuleMutationPropertyTestCase):
    outcomes = collections.Counter()

    @examples(60)
    @given(
        outer=st.sampled_from(sorted(PLAIN_HOPS)),
        inner=st.sampled_from(sorted(PLAIN_HOPS)),
        config=st.booleans(),
        form=st.sampled_from(sorted({**MODULE_FORMS, **OTHER_FORMS})),
        route=st.sampled_from(ROUTES),
    )
    def test_nested_mutation_is_eager_or_the_break(
        self, outer, inner, config, form, route
    ):
        hops = (outer, inner)
        # The config matters only where checkpoint is.
        assume("checkpoint" in hops or not config)
        with torch._dynamo.config.patch(**{CHECKPOINT_CONFIG: config}):
            if fails_upstream(outer, inner, config, route):
                self.outcomes["skipped: fails for a body that changes nothing"] += 1
                assume(False)
            self.check(outer, inner, config, form, route)

    def check(self, outer, inner, config, form, route):
        breaker = refuser(outer, inner, config, form)
        # The HigherOrderOps a break goes through, from the refusing body out.
        through = {inner, outer} if breaker == inner else {outer}
        # Only fullgraph=True must break; elsewhere the break, where allowed,
        # or else the result of plain Python: never the change lost.
        must_break = route == "fullgraph" and breaker is not None
        if breaker is None:
            may_break = False
        elif route == "fullgraph":
            may_break = True
        elif route == "eager":
            may_break = bool(through & COMPILES_IN_EAGER)
        else:
            # A break in their body cannot fall back to eager.
            may_break = bool(through & NO_FALLBACK)
        x = make_input(outer, inner)
        model = build(outer, inner, form)
        plain = copy.deepcopy(model)
        plain.hop = nested(PLAIN_HOPS, outer, inner)
        self.addCleanup(reset_globals)
        reset_globals()
        before = values(model)
        try:
            expected, plain_error = plain(x), None
        except Exception as error:
            # A body that cannot run twice: delete_buffer in map.
            expected, plain_error = None, error
        after_plain = values(plain)
        reset_globals()
        torch._dynamo.reset()
        try:
            out = run(model, x, route)
        except Exception as error:
            if plain_error is not None and repr(error) == repr(plain_error):
                self.assertEqual(values(model), after_plain)
                self.outcomes[f"raises as plain Python ({route})"] += 1
                return
            if not isinstance(error, (torch._dynamo.exc.Unsupported, RuntimeError)):
                raise
            # UncapturedHigherOrderOpError, which wraps the break, and the
            # break itself (Unsupported).
            self.assertEqual(values(model), before)
            aliased = getattr(error, "gb_type", None) == ALIASED_GB_TYPE
            if aliased and breaker != inner and outer not in DISCARDING_HOPS:
                reset_globals()
                torch._dynamo.reset()
                out = run(model, x, "graph_breaks")
                self.outcomes[f"aliased-intermediate break, falls back ({route})"] += 1
            else:
                if not may_break:
                    raise
                message = str(error)
                if form in OTHER_FORMS:
                    self.assertTrue(
                        any(f"{gb_type}\n" in message for gb_type in OTHER_GB_TYPES),
                        message,
                    )
                else:
                    _, change, class_name = MODULE_FORMS[form]
                    if breaker != inner:
                        change = NESTED_CHANGES.get(form, change)
                    self.assertIn(f"{GB_TYPE}\n", message)
                    self.assertIn(
                        f"Attempted to {change} nn.Module {class_name}", message
                    )
                self.outcomes[f"break ({route})"] += 1
                return
        self.assertFalse(must_break, f"no graph break: {outer}({inner}(...))")
        self.assertIsNone(plain_error, "plain Python raises")
        self.assertEqual(out.detach(), expected.detach())
        self.assertEqual(values(model), after_plain)
        self.outcomes[f"as plain Python ({route})"] += 1


def body_local_change(t):
    m = torch.nn.Identity()
    m.register_buffer("extra", torch.ones(2))
    m.n = 5
    return m(t) + m.extra + m.n


# A module created outside the bodies, called with other parameters.
FUNCTIONAL_MODEL = Inner()
FUNCTIONAL_PARAMS = {k: v.detach() + 1 for k, v in FUNCTIONAL_MODEL.named_parameters()}


def body_functional_call(t):
    return torch.func.functional_call(FUNCTIONAL_MODEL, FUNCTIONAL_PARAMS, (t,))


CONTROL_BODIES = {
    "body_local_change": body_local_change,
    "functional_call": body_functional_call,
}


class HopModuleMutationControlTests(HopModuleMutationPropertyTestCase):
    outcomes = collections.Counter()

    @examples(30)
    @given(
        outer=st.sampled_from(sorted(PLAIN_HOPS)),
        inner=st.sampled_from(sorted(PLAIN_HOPS)),
        route=st.sampled_from(ROUTES),
        body=st.sampled_from(sorted(CONTROL_BODIES)),
    )
    def test_nested_control_matches_plain_python(self, outer, inner, route, body):
        if fails_upstream(outer, inner, False, route):
            self.outcomes["skipped: fails for a body that changes nothing"] += 1
            assume(False)
        fn = CONTROL_BODIES[body]
        x = make_input(outer, inner)
        weights = dict(FUNCTIONAL_MODEL.named_parameters())
        torch._dynamo.reset()
        out = run(lambda t: nested(ALL_HOPS, outer, inner)(fn, t), x, route)
        self.assertEqual(out, nested(PLAIN_HOPS, outer, inner)(fn, x))
        self.assertEqual(dict(FUNCTIONAL_MODEL.named_parameters()), weights)
        self.outcomes[f"as plain Python ({route})"] += 1


if __name__ == "__main__":
    from torch._dynamo.test_case import run_tests

    run_tests()
