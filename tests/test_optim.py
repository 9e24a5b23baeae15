"""Optimizers: trajectories pinned to PyTorch's documented algorithms (float64, 1e-12), parity with
torch.optim when torch is installed, exact resume through state_dict, and clear errors."""

import copy
import math
import re

import numpy as np
import pytest

import npattn
from npattn.optim import SGD, Adam, AdamW

STEPS = 12
ATOL = 1e-12


def quadratic(rng, shapes):
    """Gradients that depend on the parameters (a convex quadratic plus a drift): g = A theta + b."""
    problems = []
    for shape in shapes:
        n = math.prod(shape)
        M = rng.standard_normal((n, n))
        problems.append((M @ M.T / n + 0.1 * np.eye(n), rng.standard_normal(n), shape))
    return problems


def grads_of(thetas, problems, step):
    return [(A @ t.ravel() + b * (1 + 0.1 * step)).reshape(shape) for t, (A, b, shape) in zip(thetas, problems)]


# ----------------------------------------------------------------------------------------------
# The reference algorithms, written from the pseudo-code boxes of PyTorch's documentation
# (torch.optim.SGD / Adam / AdamW), in the documentation's own form and order.


def reference_sgd(
    theta, grads_fn, steps, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False
):
    thetas = [t.copy() for t in theta]
    bufs = [None] * len(thetas)
    for t in range(1, steps + 1):
        grads = grads_fn(thetas, t - 1)
        for i, g in enumerate(grads):
            if maximize:
                g = -g
            if weight_decay != 0:
                g = g + weight_decay * thetas[i]
            if momentum != 0:
                if t > 1:
                    bufs[i] = momentum * bufs[i] + (1 - dampening) * g
                else:
                    bufs[i] = g
                if nesterov:
                    g = g + momentum * bufs[i]
                else:
                    g = bufs[i]
            thetas[i] = thetas[i] - lr * g
    return thetas


def reference_adam(
    theta, grads_fn, steps, lr, betas, eps, weight_decay, amsgrad=False, maximize=False, decoupled=False
):
    beta1, beta2 = betas
    thetas = [t.copy() for t in theta]
    m = [np.zeros_like(t) for t in thetas]
    v = [np.zeros_like(t) for t in thetas]
    v_max = [np.zeros_like(t) for t in thetas]
    for t in range(1, steps + 1):
        grads = grads_fn(thetas, t - 1)
        for i, g in enumerate(grads):
            if maximize:
                g = -g
            if decoupled:  # AdamW
                thetas[i] = thetas[i] - lr * weight_decay * thetas[i]
            elif weight_decay != 0:  # Adam
                g = g + weight_decay * thetas[i]
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * g**2
            m_hat = m[i] / (1 - beta1**t)
            if amsgrad:
                v_max[i] = np.maximum(v_max[i], v[i])
                v_hat = v_max[i] / (1 - beta2**t)
            else:
                v_hat = v[i] / (1 - beta2**t)
            thetas[i] = thetas[i] - lr * m_hat / (np.sqrt(v_hat) + eps)
    return thetas


SGD_CONFIGS = [
    {"lr": 0.05},
    {"lr": 0.05, "momentum": 0.9},
    {"lr": 0.05, "momentum": 0.9, "dampening": 0.3},
    {"lr": 0.05, "momentum": 0.9, "nesterov": True},
    {"lr": 0.05, "weight_decay": 0.1},
    {"lr": 0.03, "momentum": 0.8, "dampening": 0.1, "weight_decay": 0.05},
    {"lr": 0.02, "momentum": 0.7, "nesterov": True, "weight_decay": 0.2},
    {"lr": 0.05, "momentum": 0.9, "maximize": True},
]
ADAM_CONFIGS = [
    {"lr": 0.01, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0},
    {"lr": 0.05, "betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 0.1},
    {"lr": 0.05, "betas": (0.0, 0.5), "eps": 1e-8, "weight_decay": 0.0},
    {"lr": 0.01, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.02, "amsgrad": True},
    {"lr": 0.01, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0, "maximize": True},
]


def setup(rng):
    shapes = [(3, 2), (4,)]
    problems = quadratic(rng, shapes)
    start = [rng.standard_normal(s) for s in shapes]
    params = [npattn.Parameter(s.copy()) for s in start]
    return problems, start, params


def run(optimizer, params, problems, steps=STEPS):
    for step in range(steps):
        for p, g in zip(params, grads_of([p.data for p in params], problems, step)):
            p.grad[...] = g
        optimizer.step()
        optimizer.zero_grad()
    return [p.data for p in params]


@pytest.mark.parametrize("config", SGD_CONFIGS)
def test_sgd_matches_published_algorithm(rng, config):
    problems, start, params = setup(rng)
    got = run(SGD(params, **config), params, problems)
    want = reference_sgd(start, lambda th, k: grads_of(th, problems, k), STEPS, **config)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=0, atol=ATOL)


@pytest.mark.parametrize("cls", [Adam, AdamW])
@pytest.mark.parametrize("config", ADAM_CONFIGS)
def test_adam_and_adamw_match_published_algorithm(rng, cls, config):
    problems, start, params = setup(rng)
    got = run(cls(params, **config), params, problems)
    want = reference_adam(start, lambda th, k: grads_of(th, problems, k), STEPS, decoupled=cls is AdamW, **config)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=0, atol=ATOL)


def test_reference_comparison_detects_the_wrong_weight_decay(rng):
    """The 1e-12 comparison can fail: Adam's L2 decay is not AdamW's decoupled decay."""
    problems, start, params = setup(rng)
    config = ADAM_CONFIGS[1]
    got = run(Adam(params, **config), params, problems)
    wrong = reference_adam(start, lambda th, k: grads_of(th, problems, k), STEPS, decoupled=True, **config)
    assert max(np.max(np.abs(g - w)) for g, w in zip(got, wrong)) > 1e-4


def test_defaults_are_pytorchs():
    p = [npattn.Parameter(np.zeros(2))]
    assert SGD(p).defaults["lr"] == 1e-3
    assert Adam(p).defaults == {
        "lr": 1e-3,
        "betas": (0.9, 0.999),
        "eps": 1e-8,
        "weight_decay": 0.0,
        "amsgrad": False,
        "maximize": False,
    }
    assert AdamW(p).defaults["weight_decay"] == 1e-2


@pytest.mark.parametrize("cls,config", [(SGD, SGD_CONFIGS[5]), (Adam, ADAM_CONFIGS[3]), (AdamW, ADAM_CONFIGS[1])])
def test_state_dict_resume_is_exact(rng, tmp_path, cls, config):
    problems, start, params = setup(rng)
    straight = run(cls(params, **config), params, problems, STEPS)

    params = [npattn.Parameter(s.copy()) for s in start]
    first = cls(params, **config)
    run(first, params, problems, 5)
    npattn.save(first.state_dict(), tmp_path / "opt.npz")
    saved_data = [p.data.copy() for p in params]

    params2 = [npattn.Parameter(d) for d in saved_data]
    second = cls(params2, lr=123.0)  # hyper-parameters come back from the state dict
    second.load_state_dict(npattn.load(tmp_path / "opt.npz"))
    assert second.param_groups[0]["lr"] == config["lr"]
    for step in range(5, STEPS):
        for p, g in zip(params2, grads_of([p.data for p in params2], problems, step)):
            p.grad[...] = g
        second.step()
        second.zero_grad()
    for a, b in zip(straight, params2):
        np.testing.assert_array_equal(a, b.data)


def test_param_groups_take_their_own_lr(rng):
    a, b = npattn.Parameter(np.ones(2)), npattn.Parameter(np.ones(2))
    opt = SGD([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1)
    a.grad[...] = 1
    b.grad[...] = 1
    opt.step()
    np.testing.assert_allclose(a.data, 0.9)
    np.testing.assert_allclose(b.data, 0.5)


def test_zero_grad_zeros_in_place():
    p = npattn.Parameter(np.ones(3))
    grad = p.grad
    grad[...] = 5
    SGD([p], lr=0.1).zero_grad()
    assert p.grad is grad and not p.grad.any()


def test_optimizes_a_module():
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    opt = Adam(model.parameters(), lr=0.1)
    before = model.W_query.data.copy()
    model.backward(np.ones_like(model(npattn.book_inputs())))
    opt.step()
    assert not np.array_equal(before, model.W_query.data)
    assert model.W_query.data.dtype == np.float32


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda p: SGD([], lr=0.1), "empty parameter list"),
        (lambda p: Adam(iter(()), lr=0.1), "empty parameter list"),
        (lambda p: SGD(p[0], lr=0.1), "single Parameter"),
        (lambda p: SGD([np.zeros(2)], lr=0.1), "can only optimize npattn.Parameter"),
        (lambda p: SGD(p, lr=-0.1), "Invalid learning rate: -0.1"),
        (lambda p: Adam(p, lr=-1e-3), "Invalid learning rate"),
        (lambda p: AdamW(p, lr=float("nan")), "Invalid learning rate"),
        (lambda p: SGD(p, lr=0.1, momentum=-0.5), "Invalid momentum value"),
        (lambda p: SGD(p, lr=0.1, weight_decay=-1), "Invalid weight_decay value"),
        (lambda p: SGD(p, lr=0.1, nesterov=True), "Nesterov momentum requires a momentum and zero dampening"),
        (lambda p: SGD(p, lr=0.1, momentum=0.9, dampening=0.1, nesterov=True), "Nesterov"),
        (lambda p: Adam(p, betas=(1.0, 0.999)), r"beta parameter at index 0: 1.0 \(must lie in \[0, 1\)\)"),
        (lambda p: Adam(p, betas=(-0.1, 0.999)), "index 0"),
        (lambda p: AdamW(p, betas=(0.9, 1.0)), "index 1"),
        (lambda p: Adam(p, betas=(0.9, 1.5)), "index 1"),
        (lambda p: Adam(p, betas=0.9), "expected a pair"),
        (lambda p: Adam(p, eps=-1e-8), "Invalid epsilon value"),
        (lambda p: Adam(p, weight_decay=-0.01), "Invalid weight_decay value"),
        (lambda p: SGD([{"params": p}, {"params": p}], lr=0.1), "more than one parameter group"),
    ],
)
def test_bad_arguments_raise_clear_errors(make, message):
    params = [npattn.Parameter(np.zeros(2))]
    with pytest.raises(npattn.ConfigError, match=message):
        make(params)


def test_load_state_dict_rejects_mismatches():
    p = [npattn.Parameter(np.zeros((2, 2))), npattn.Parameter(np.zeros(3))]
    opt = Adam(p)
    for q in p:
        q.grad[...] = 1
    opt.step()
    state = opt.state_dict()
    with pytest.raises(npattn.StateDictError, match="has 2 parameters, this optimizer has 1"):
        Adam(p[:1]).load_state_dict(state)
    other = Adam([npattn.Parameter(np.zeros((2, 2))), npattn.Parameter(np.zeros(4))])
    with pytest.raises(npattn.StateDictError, match=r"has shape \(3,\), the parameter has \(4,\)"):
        other.load_state_dict(state)
    with pytest.raises(npattn.StateDictError, match="1 parameter groups"):
        SGD([{"params": p[:1]}, {"params": p[1:]}], lr=0.1).load_state_dict(state)
    with pytest.raises(npattn.StateDictError, match="needs 'state' and 'param_groups'"):
        opt.load_state_dict({"state": {}})


# ----------------------------------------------------------------------------------------------
# Parity with torch.optim (float64).


@pytest.mark.torch
@pytest.mark.parametrize(
    "name,config",
    [("SGD", c) for c in SGD_CONFIGS] + [(n, c) for n in ("Adam", "AdamW") for c in ADAM_CONFIGS],
)
def test_torch_parity(rng, name, config):
    torch = pytest.importorskip("torch")
    problems, start, params = setup(rng)
    got = run({"SGD": SGD, "Adam": Adam, "AdamW": AdamW}[name](params, **config), params, problems)
    tparams = [torch.tensor(s.copy(), dtype=torch.float64, requires_grad=True) for s in start]
    topt = getattr(torch.optim, name)(tparams, **config)
    for step in range(STEPS):
        for tp, g in zip(tparams, grads_of([tp.detach().numpy() for tp in tparams], problems, step)):
            tp.grad = torch.from_numpy(g.copy())
        topt.step()
    for g, tp in zip(got, tparams):
        np.testing.assert_allclose(g, tp.detach().numpy(), rtol=0, atol=ATOL)


# ----------------------------------------------------------------------------------------------
# Every way a setting enters is checked the same way; a failed step or load changes nothing.


def _model():
    return npattn.SelfAttention_v1(3, 2, rng=0, dtype=np.float64)


def _snapshot(model, opt):
    weights = [p.data.copy() for p in model.parameters()]
    grads = [None if p.grad is None else np.array(p.grad, copy=True) for p in model.parameters()]
    return weights, grads, copy.deepcopy(opt.state_dict())


def _assert_unchanged(model, opt, before):
    weights, grads, state = _snapshot(model, opt)
    for a, b in zip(weights + grads, before[0] + before[1]):
        assert (a is None and b is None) or np.array_equal(a, b)
    assert repr(state) == repr(before[2])


BAD_SETTINGS = [
    ({"lr": -1.0}, "Invalid learning rate: -1.0"),
    ({"lr": float("nan")}, "Invalid learning rate: expected a finite number >= 0, got nan"),
    ({"lr": "0.1"}, "Invalid learning rate: expected a finite number >= 0, got '0.1'"),
    ({"weight_decay": -1.0}, "Invalid weight_decay value"),
    ({"maximize": "no"}, "maximize must be True or False, got 'no'"),
    ({"bogus": 1}, "unknown setting(s) 'bogus'"),
]
ADAM_SETTINGS = [
    ({"betas": (1.0, 0.9)}, "Invalid beta parameter at index 0: 1.0"),
    ({"betas": (0.9, float("nan"))}, "Invalid beta parameter at index 1: nan"),
    ({"eps": -1.0}, "Invalid epsilon value"),
    ({"amsgrad": "no"}, "amsgrad must be True or False"),
]
SGD_SETTINGS = [
    ({"momentum": -1.0}, "Invalid momentum value"),
    ({"nesterov": "no", "momentum": 0.9}, "nesterov must be True or False"),
    ({"nesterov": True}, "Nesterov momentum requires a momentum"),
]
CASES = (
    [(cls, s, m) for cls in (SGD, Adam, AdamW) for s, m in BAD_SETTINGS]
    + [(cls, s, m) for cls in (Adam, AdamW) for s, m in ADAM_SETTINGS]
    + [(SGD, s, m) for s, m in SGD_SETTINGS]
)
ENTRIES = ["group", "add_param_group", "load_state_dict", "edit_then_step"]


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("cls,settings,message", CASES, ids=lambda v: str(v) if isinstance(v, dict) else None)
def test_every_way_a_setting_enters_is_checked_like_the_constructor(entry, cls, settings, message):
    model = _model()
    params = list(model.parameters())
    if "bogus" not in settings:  # the constructor itself refuses the same value with the same message
        with pytest.raises(npattn.ConfigError, match=re.escape(message)):
            cls(params, **settings)
    if entry == "group":
        with pytest.raises(npattn.ConfigError, match=re.escape("parameter group 1: " + message)):
            cls([{"params": params[:1]}, {"params": params[1:], **settings}])
        return
    opt = cls(params[:2] if entry == "add_param_group" else params, lr=0.1)
    for p in params:
        p.grad[...] = 1.0
    opt.step()
    before = _snapshot(model, opt)
    if entry == "add_param_group":
        with pytest.raises(npattn.ConfigError, match=re.escape(message)):
            opt.add_param_group({"params": params[2:], **settings})
        assert len(opt.param_groups) == 1
    elif entry == "load_state_dict":
        state = copy.deepcopy(opt.state_dict())
        state["param_groups"][0].update(settings)
        with pytest.raises(npattn.StateDictError, match=re.escape(message)):
            opt.load_state_dict(state)
    else:
        saved = dict(opt.param_groups[0])
        opt.param_groups[0].update(settings)
        with pytest.raises(npattn.ConfigError, match=re.escape(message)):
            opt.step()
        opt.param_groups[0].clear()
        opt.param_groups[0].update(saved)
    _assert_unchanged(model, opt, before)


@pytest.mark.parametrize("cls", [SGD, Adam, AdamW])
def test_the_same_parameter_twice_is_refused(cls):
    model = _model()
    with pytest.raises(npattn.ConfigError, match="listed twice in one group"):
        cls([model.W_query, model.W_key, model.W_query])
    opt = cls([model.W_query])
    with pytest.raises(npattn.ConfigError, match="more than one parameter group"):
        opt.add_param_group({"params": [model.W_key, model.W_query]})
    opt.param_groups[0]["params"].append(model.W_query)  # an edit after construction is caught at step
    with pytest.raises(npattn.ConfigError, match="listed twice"):
        opt.step()


@pytest.mark.parametrize("cls", [SGD, Adam, AdamW])
def test_a_module_instead_of_its_parameters(cls):
    with pytest.raises(npattn.ConfigError, match=r"got SelfAttention_v1 \(pass model.parameters\(\)\)"):
        cls(_model())
    with pytest.raises(npattn.ConfigError, match="expects an iterable"):
        cls(None)
    with pytest.raises(npattn.ConfigError, match="'params' must be an iterable"):
        cls([{"params": _model()}])


STEP_FAILURES = [
    (lambda m, o: setattr(m.W_value, "grad", np.ones((2, 3))), npattn.ShapeError, ".grad has shape (2, 3)"),
    (lambda m, o: setattr(m.W_value, "grad", np.ones((1, 2))), npattn.ShapeError, ".grad has shape (1, 2)"),
    (lambda m, o: setattr(m.W_value, "grad", np.zeros((3, 2), complex)), npattn.DTypeError, "complex128"),
    (lambda m, o: setattr(m.W_value, "grad", np.array([["a"] * 2] * 3)), npattn.DTypeError, "<U1"),
    (lambda m, o: m.W_value.data.setflags(write=False), npattn.ConfigError, "read-only"),
    (lambda m, o: o.state[m.W_value].update(exp_avg=np.zeros(7)), npattn.StateDictError, "has shape (7,)"),
    (lambda m, o: o.state[m.W_value].pop("exp_avg_sq"), npattn.StateDictError, "expected the buffers"),
    (lambda m, o: o.param_groups[0].update(amsgrad=True), npattn.StateDictError, "amsgrad=True"),
]


@pytest.mark.parametrize("edit,error,message", STEP_FAILURES)
def test_a_failed_step_changes_nothing(edit, error, message):
    """The bad parameter is the last one: without the checks first, the others would have moved."""
    model = _model()
    opt = Adam(model.parameters(), lr=0.1)
    for p in model.parameters():
        p.grad[...] = 1.0
    opt.step()
    edit(model, opt)
    before = _snapshot(model, opt)
    with pytest.raises(error, match=re.escape(message)):
        opt.step()
    _assert_unchanged(model, opt, before)


@pytest.mark.parametrize("cls", [SGD, Adam, AdamW])
def test_a_grad_of_none_is_skipped_like_pytorch(cls):
    model = _model()
    opt = cls(model.parameters(), lr=0.1)
    for p in model.parameters():
        p.grad[...] = 1.0
    before = model.W_value.data.copy()
    model.W_value.grad = None
    opt.step()
    np.testing.assert_array_equal(model.W_value.data, before)
    assert not np.array_equal(model.W_query.data, _model().W_query.data)
    opt.zero_grad()
    assert model.W_value.grad is None  # like torch's zero_grad(set_to_none=True): stays None
    np.testing.assert_array_equal(model.W_query.grad, np.zeros((3, 2)))


@pytest.mark.parametrize("cls", [SGD, Adam])
def test_grads_of_another_dtype_are_used_in_the_parameters_dtype(cls):
    """A float32 .grad on a float64 parameter: the update is the float64 one (no float32 rounding)."""
    a, b = _model(), _model()
    opt_a, opt_b = cls(a.parameters(), lr=0.1), cls(b.parameters(), lr=0.1)
    g = np.random.default_rng(0).standard_normal((3, 2)).astype(np.float32)
    for p, q in zip(a.parameters(), b.parameters()):
        p.grad = g
        q.grad[...] = g.astype(np.float64)
    opt_a.step()
    opt_b.step()
    for p, q in zip(a.parameters(), b.parameters()):
        assert p.data.dtype == np.float64
        np.testing.assert_array_equal(p.data, q.data)


BAD_STATE = [
    (lambda s: s["state"][0].update(step=0), "'step' must be an integer >= 1"),
    (lambda s: s["state"][0].update(step=1.5), "'step' must be an integer >= 1"),
    (lambda s: s["state"][0].pop("exp_avg"), "expected the buffers"),
    (lambda s: s["state"][0].update(momentum_buffer=np.zeros((3, 2))), "unknown state 'momentum_buffer'"),
    (lambda s: s["state"][0]["exp_avg"].__setitem__((0, 0), np.nan), "'exp_avg' holds NaN or inf"),
    (lambda s: s["state"][0]["exp_avg_sq"].__setitem__((0, 0), -1.0), "'exp_avg_sq' holds negative values"),
    (lambda s: s["state"][0].update(exp_avg=np.array([["a"] * 2] * 3)), "expected a real numeric array"),
    (lambda s: s["state"].update(x=s["state"].pop(0)), "state for parameter index 'x'"),
    (lambda s: s["param_groups"][0].update(params=[0, 0, 1]), "parameter index 0 is listed twice"),
    (lambda s: s["param_groups"][0].pop("lr"), "lacks the setting(s) 'lr'"),
    (lambda s: s["param_groups"][0].update(amsgrad=True), "amsgrad=True"),
    (lambda s: s.update(param_groups=5), "needs 'state' and 'param_groups'"),
]


@pytest.mark.parametrize("edit,message", BAD_STATE)
def test_load_state_dict_checks_buffers_before_changing_anything(edit, message):
    model = _model()
    opt = Adam(model.parameters(), lr=0.1)
    for p in model.parameters():
        p.grad[...] = 1.0
    opt.step()
    state = copy.deepcopy(opt.state_dict())
    edit(state)
    before = _snapshot(model, opt)
    with pytest.raises(npattn.StateDictError, match=re.escape(message)):
        opt.load_state_dict(state)
    _assert_unchanged(model, opt, before)


# ----------------------------------------------------------------------------------------------
# PyTorch's implementation switches: accepted where they change nothing, refused clearly otherwise.

SWITCHES = {
    SGD: {"foreach": None, "differentiable": False, "fused": None},
    Adam: {
        "foreach": None,
        "capturable": False,
        "differentiable": False,
        "fused": None,
        "decoupled_weight_decay": False,
    },
    AdamW: {"foreach": None, "capturable": False, "differentiable": False, "fused": None},
}


@pytest.mark.parametrize("cls", [SGD, Adam, AdamW])
def test_pytorchs_switches_at_their_defaults_change_nothing(cls):
    problems, _, params = setup(np.random.default_rng(0))
    plain = run(cls(params, lr=0.01), params, problems)
    problems, _, params = setup(np.random.default_rng(0))
    switched = run(cls(params, lr=0.01, **SWITCHES[cls], maximize=False), params, problems)
    for a, b in zip(plain, switched):
        np.testing.assert_array_equal(a, b)
    cls(params, lr=0.01, foreach=False, fused=False)  # npattn's own way: one parameter at a time, unfused
    cls(params, lr=0.01, foreach=0, fused=np.False_, differentiable=0)  # values equal to False count as False


@pytest.mark.parametrize("cls", [SGD, Adam, AdamW])
@pytest.mark.parametrize("name", ["foreach", "fused", "capturable", "differentiable", "decoupled_weight_decay"])
def test_pytorchs_switches_that_would_change_something_are_refused(cls, name):
    params = [npattn.Parameter(np.zeros(2))]
    if name not in SWITCHES[cls]:
        with pytest.raises(TypeError, match="unexpected keyword"):  # PyTorch's class has no such argument either
            cls(params, **{name: False})
        return
    with pytest.raises(npattn.ConfigError, match=rf"{cls.__name__}: {name}=True is not supported \(.*\); leave it at"):
        cls(params, **{name: True})
    with pytest.raises(npattn.ConfigError, match=rf"{name}='no' is not supported"):
        cls(params, **{name: "no"})
    for true in (1, np.True_):
        with pytest.raises(npattn.ConfigError, match=rf"{name}={true!r} is not supported"):
            cls(params, **{name: true})


@pytest.mark.parametrize("cls", ["SGD", "Adam", "AdamW"])
def test_the_same_switches_as_pytorch(cls):
    torch = pytest.importorskip("torch")
    import inspect

    ours = inspect.signature(getattr(npattn.optim, cls)).parameters
    theirs = inspect.signature(getattr(torch.optim, cls)).parameters
    assert set(ours) == set(theirs), set(ours) ^ set(theirs)
    for name, p in theirs.items():
        if name in ("params", "lr", "weight_decay"):
            continue
        assert ours[name].default == p.default, name


# ----------------------------------------------------------------------------------------------
# PyTorch habits: step(closure), torch's own state dicts, tensor and 0-d array settings.


@pytest.mark.parametrize("cls", [SGD, Adam, AdamW])
def test_step_takes_a_closure_like_pytorch(cls):
    p = npattn.Parameter(np.array([1.0, -2.0]))
    opt, calls = cls([p], lr=0.1), []

    def closure():
        calls.append(p.data.copy())  # called once, before the update
        p.grad = 2 * p.data
        return float(p.data @ p.data)

    assert opt.step(closure) == 5.0
    assert len(calls) == 1 and np.array_equal(calls[0], [1.0, -2.0]) and not np.array_equal(p.data, calls[0])
    assert opt.step() is None
    with pytest.raises(npattn.ConfigError, match=r"step\(closure\): expected a function .* got str"):
        opt.step("loss")


def _torch_layout(opt):
    """``opt.state_dict()`` as torch.optim writes it: every switch listed, step counts as floats."""
    sd = opt.state_dict()
    adam = isinstance(opt, Adam)
    extra = {"foreach": None, "differentiable": False, "fused": None}
    if adam:
        extra.update(capturable=False, decoupled_weight_decay=isinstance(opt, AdamW))
    for g in sd["param_groups"]:
        g.update(extra)
    for s in sd["state"].values():
        if "step" in s:
            s["step"] = np.float32(s["step"])
    return sd


@pytest.mark.parametrize("cls", [SGD, Adam, AdamW])
def test_a_state_dict_in_torchs_layout_loads(cls):
    problems, _, params = setup(np.random.default_rng(0))
    opt = cls(params, lr=0.01, **({"momentum": 0.9} if cls is SGD else {}))
    run(opt, params, problems)
    sd = _torch_layout(opt)
    again = cls(params, lr=0.5)
    again.load_state_dict(sd)
    for a, b in zip(again.state_dict()["state"].values(), opt.state_dict()["state"].values()):
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert again.param_groups[0]["lr"] == 0.01
    bad = copy.deepcopy(sd)
    bad["param_groups"][0]["differentiable"] = True
    with pytest.raises(npattn.StateDictError, match=r"parameter group 0: .*differentiable=True is not supported"):
        cls(params).load_state_dict(bad)
    if cls is not SGD:  # Adam's state dict says False, AdamW's True: each refuses the other's
        bad = copy.deepcopy(sd)
        bad["param_groups"][0]["decoupled_weight_decay"] = cls is Adam
        with pytest.raises(npattn.StateDictError, match="decoupled_weight_decay"):
            cls(params).load_state_dict(bad)


@pytest.mark.torch
@pytest.mark.parametrize(
    "name,config",
    [("SGD", {"lr": 0.1, "momentum": 0.9}), ("Adam", {"lr": 0.01, "amsgrad": True}), ("AdamW", {"lr": 0.01})],
)
def test_torchs_own_state_dict_continues_like_torch(rng, name, config):
    torch = pytest.importorskip("torch")
    problems, start, params = setup(rng)
    tparams = [torch.tensor(s.copy(), dtype=torch.float64, requires_grad=True) for s in start]
    topt = getattr(torch.optim, name)(tparams, **config)

    def torch_step(step):
        for tp, g in zip(tparams, grads_of([tp.detach().numpy() for tp in tparams], problems, step)):
            tp.grad = torch.from_numpy(g.copy())
        topt.step()

    for step in range(3):
        torch_step(step)
    for p, tp in zip(params, tparams):
        p.data[...] = tp.detach().numpy()
    opt = getattr(npattn.optim, name)(params)
    opt.load_state_dict(topt.state_dict())
    for step in range(3, 6):
        torch_step(step)
        for p, g in zip(params, grads_of([p.data for p in params], problems, step)):
            p.grad = g
        opt.step()
    for p, tp in zip(params, tparams):
        np.testing.assert_allclose(p.data, tp.detach().numpy(), rtol=0, atol=ATOL)


def test_a_0d_array_or_tensor_is_a_number():
    p = npattn.Parameter(np.zeros(2))
    opt = Adam([p], lr=np.array(0.05), betas=(np.array(0.8), 0.9), eps=np.float32(1e-6))
    assert opt.param_groups[0]["lr"] == 0.05 and type(opt.param_groups[0]["lr"]) is float
    assert opt.param_groups[0]["betas"] == (0.8, 0.9)
    with pytest.raises(npattn.ConfigError, match=r"got an array of shape \(2,\) and dtype float64"):
        SGD([p], lr=np.array([0.1, 0.2]))
    with pytest.raises(npattn.ConfigError, match=r"got an array of shape \(\) and dtype bool"):
        SGD([p], lr=np.array(True))
    torch = pytest.importorskip("torch")
    assert SGD([p], lr=torch.tensor(0.25)).param_groups[0]["lr"] == 0.25


def test_parameters_in_a_state_dicts_params_are_named_by_shape():
    model = _model()
    opt = Adam(model.parameters())
    sd = opt.state_dict()
    sd["param_groups"][0]["params"] = list(model.parameters())
    with pytest.raises(npattn.StateDictError) as info:
        opt.load_state_dict(sd)
    assert str(info.value) == (
        "parameter group 0: 'params' must list int indices (as state_dict() writes), got Parameter of shape (3, 2)"
    )
    sd["param_groups"][0]["params"] = [0, 0, 1]
    with pytest.raises(npattn.StateDictError, match="parameter index 0 is listed twice"):
        opt.load_state_dict(sd)


def test_amsgrad_switched_on_mid_run_is_named():
    p = npattn.Parameter(np.ones(2))
    opt = Adam([p])
    p.grad = np.ones(2)
    opt.step()
    opt.param_groups[0]["amsgrad"] = True
    with pytest.raises(npattn.StateDictError, match=r"amsgrad was switched on after steps were taken"):
        opt.step()


# ----------------------------------------------------------------------------------------------
# A 0-d Parameter (torch allows scalar parameters) is updated like any other, and a step that
# fails on one parameter leaves the ones before it unchanged.

SCALAR_CASES = [(SGD, c, reference_sgd, {}) for c in SGD_CONFIGS[:4]] + [
    (cls, c, reference_adam, {"decoupled": cls is AdamW}) for cls in (Adam, AdamW) for c in ADAM_CONFIGS
]


def _scalar_grads(thetas, step):
    return [np.array(0.7 * float(t) - 0.3 + 0.1 * step) for t in thetas]


@pytest.mark.parametrize("cls, config, reference, extra", SCALAR_CASES)
def test_scalar_parameter_follows_the_reference(cls, config, reference, extra):
    p = npattn.Parameter(np.array(1.5))
    opt = cls([p], **config)
    for step in range(STEPS):
        p.grad = _scalar_grads([p.data], step)[0]
        opt.step()
    (want,) = reference([np.array(1.5)], _scalar_grads, STEPS, **config, **extra)
    assert p.data.shape == () and all(getattr(b, "shape", ()) == () for b in opt.state[p].values())
    np.testing.assert_allclose(p.data, want, rtol=0, atol=ATOL)


@pytest.mark.parametrize("cls", [SGD, Adam, AdamW])
def test_scalar_parameter_matches_torch(cls):
    torch = pytest.importorskip("torch")
    p = npattn.Parameter(np.array(1.5))
    tp = torch.nn.Parameter(torch.tensor(1.5, dtype=torch.float64))
    opt, topt = cls([p], lr=0.1, weight_decay=0.1), getattr(torch.optim, cls.__name__)([tp], lr=0.1, weight_decay=0.1)
    for g in (0.3, -0.2, 0.7):
        p.grad, tp.grad = np.array(g), torch.tensor(g, dtype=torch.float64)
        opt.step()
        topt.step()
    assert p.data.item() == pytest.approx(tp.item(), abs=1e-15)


@pytest.mark.parametrize("cls", [SGD, Adam, AdamW])
def test_a_step_failing_on_a_later_parameter_changes_nothing(cls, monkeypatch):
    model = _model()
    opt = cls(model.parameters(), lr=0.1)
    for p in model.parameters():
        p.grad = np.ones_like(p.data)
    opt.step()
    before = _snapshot(model, opt)
    update, calls = cls._update, []

    def fails_on_the_second(self, *args):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("planted failure")
        return update(self, *args)

    monkeypatch.setattr(cls, "_update", fails_on_the_second)
    with pytest.raises(RuntimeError, match="planted failure"):
        opt.step()
    _assert_unchanged(model, opt, before)


@pytest.mark.parametrize("cls", [Adam, AdamW])
def test_eps_zero_with_a_zero_gradient_is_nan_as_in_pytorch(cls):
    # documented in docs/errors.md (decisions): torch.optim.Adam(eps=0) gives 0/0 = NaN here too
    p = npattn.Parameter(np.array([1.0, 2.0]))
    opt = cls([p], eps=0.0)
    p.grad = np.zeros(2)
    with np.errstate(invalid="ignore"):
        opt.step()
    assert np.isnan(p.data).all()


@pytest.mark.parametrize("cls", [SGD, Adam, AdamW])
def test_a_grad_that_is_the_parameters_own_data_updates_like_torch(cls):
    # torch's AdamW decays the weights in place before it reads the grad: a .grad sharing them sees it
    torch = pytest.importorskip("torch")
    p = npattn.Parameter(np.array([1.0, -2.0, 0.5]))
    tp = torch.nn.Parameter(torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64))
    opt = cls([p], lr=0.1, weight_decay=0.5)
    topt = getattr(torch.optim, cls.__name__)([tp], lr=0.1, weight_decay=0.5)
    for _ in range(3):
        p.grad, tp.grad = p.data, tp.detach()
        opt.step()
        topt.step()
    np.testing.assert_allclose(p.data, tp.detach().numpy(), rtol=0, atol=1e-15)
