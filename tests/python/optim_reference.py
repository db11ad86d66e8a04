"""torch.optim side of the optimizer and scheduler parity tests (tests/core/optim_parity_tests.cpp).

    optim_reference.py export DIR   writes, for every optimizer case below, the starting
                                    parameters, the gradient of each of STEPS steps and the
                                    parameters after each step:
                                    DIR/<case>_{start,grads,trajectory}_<i>.pt (i: parameter);
                                    for every scheduler case, the lr (and the momentum or beta1
                                    of cycling schedulers) of step 0..STEPS:
                                    DIR/<case>_{lrs,momenta}.pt
                                    clip_grad_norm_ / clip_grad_value_ on random gradients:
                                    DIR/clip_{grads_<i>,norm_<i>,value_<i>,total_norm}.pt

The gradients are fixed random tensors (independent of the parameters) so that both sides see
exactly the same inputs at every step. Each case's name is the one the C++ test uses with its
`optimizer:` / `scheduler:` config.

KERNEL_CASES are Adam, AdamW and SGD with torch.optim's `foreach` / `fused` (and `foreach=False`
with `maximize`), exported as the optimizer cases are. In the "late" ones parameter 1 has no
gradient (None) in the first LATE steps, so its state starts after parameter 0's.
"""
import argparse
from pathlib import Path

import torch

STEPS = 100
SHAPES = [(5, 4), (3,)]

OPTIMIZERS = {
    "adadelta": (torch.optim.Adadelta, {}),
    "adadelta_args": (torch.optim.Adadelta, {"lr": 0.5, "rho": 0.8, "eps": 1e-5, "weight_decay": 0.1}),
    "adamax": (torch.optim.Adamax, {}),
    "adamax_args": (torch.optim.Adamax, {"lr": 0.01, "betas": (0.8, 0.99), "weight_decay": 0.05,
                                         "maximize": True}),
    "asgd": (torch.optim.ASGD, {}),
    "asgd_args": (torch.optim.ASGD, {"lr": 0.05, "lambd": 1e-3, "alpha": 0.5, "t0": 20.0, "weight_decay": 0.01}),
    "rprop": (torch.optim.Rprop, {}),
    "rprop_args": (torch.optim.Rprop, {"lr": 0.05, "etas": (0.4, 1.5), "step_sizes": (1e-4, 0.2)}),
    "nadam": (torch.optim.NAdam, {}),
    "nadam_args": (torch.optim.NAdam, {"lr": 0.01, "betas": (0.85, 0.99), "weight_decay": 0.1,
                                       "momentum_decay": 8e-3}),
    "nadam_decoupled": (torch.optim.NAdam, {"weight_decay": 0.1, "decoupled_weight_decay": True}),
    "radam": (torch.optim.RAdam, {}),
    "radam_args": (torch.optim.RAdam, {"lr": 0.01, "betas": (0.8, 0.9), "eps": 1e-6, "weight_decay": 0.1}),
    "radam_decoupled": (torch.optim.RAdam, {"weight_decay": 0.1, "decoupled_weight_decay": True}),
}

LATE = 5

# case -> (class, its args, late). Each is one of the C++ test's kKernelCases.
_ADAM_ARGS = {"lr": 0.01, "betas": (0.8, 0.99), "weight_decay": 0.1, "amsgrad": True, "maximize": True}
_ADAMW_ARGS = {"lr": 0.01, "eps": 1e-6, "weight_decay": 0.1, "amsgrad": True, "maximize": True}
_SGD_NESTEROV = {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}
_SGD_ARGS = {"lr": 0.05, "momentum": 0.5, "dampening": 0.1, "weight_decay": 0.1, "maximize": True}
_SGD_LATE = {"lr": 0.01, "momentum": 0.9, "weight_decay": 0.01}
KERNEL_CASES = {}
for _flag in ("foreach", "fused"):
    KERNEL_CASES.update({
        f"adam_{_flag}": (torch.optim.Adam, {_flag: True}, False),
        f"adam_args_{_flag}": (torch.optim.Adam, {**_ADAM_ARGS, _flag: True}, False),
        f"adam_late_{_flag}": (torch.optim.Adam, {"amsgrad": True, _flag: True}, True),
        f"adamw_{_flag}": (torch.optim.AdamW, {_flag: True}, False),
        f"adamw_args_{_flag}": (torch.optim.AdamW, {**_ADAMW_ARGS, _flag: True}, False),
        f"sgd_{_flag}": (torch.optim.SGD, {"lr": 0.05, _flag: True}, False),
        f"sgd_momentum_{_flag}": (torch.optim.SGD, {"lr": 0.05, "momentum": 0.9, _flag: True}, False),
        f"sgd_nesterov_{_flag}": (torch.optim.SGD, {**_SGD_NESTEROV, _flag: True}, False),
        f"sgd_args_{_flag}": (torch.optim.SGD, {**_SGD_ARGS, _flag: True}, False),
        f"sgd_late_{_flag}": (torch.optim.SGD, {**_SGD_LATE, _flag: True}, True),
    })
# torch.optim's fused SGD fails when a parameter's first gradient comes after the others' first
# step (it hands the kernel a None momentum buffer: TypeError); oml-cpp gives that parameter a
# first-step call of its own, which equals torch.optim's foreach SGD.
KERNEL_CASES["sgd_late_fused"] = (torch.optim.SGD, {**_SGD_LATE, "foreach": True}, True)
# The for-loop (LibTorch's own step) with maximize, against torch.optim's single-tensor step.
KERNEL_CASES["adam_args_loop"] = (torch.optim.Adam, {**_ADAM_ARGS, "foreach": False}, False)
KERNEL_CASES["adamw_args_loop"] = (torch.optim.AdamW, {**_ADAMW_ARGS, "foreach": False}, False)
KERNEL_CASES["sgd_args_loop"] = (torch.optim.SGD, {**_SGD_ARGS, "foreach": False}, False)

S = torch.optim.lr_scheduler
# (optimizer class, its args, scheduler class, scheduler args, the momentum to record: "momentum", "beta1" or None)
SCHEDULERS = {
    "cyclic": (torch.optim.SGD, {"lr": 0.1}, S.CyclicLR, {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 10},
               "momentum"),
    "cyclic_triangular2": (torch.optim.SGD, {"lr": 0.1, "momentum": 0.5}, S.CyclicLR,
                           {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 7, "step_size_down": 5,
                            "mode": "triangular2"}, "momentum"),
    "cyclic_exp_range": (torch.optim.Adam, {"lr": 0.1}, S.CyclicLR,
                         {"base_lr": 0.001, "max_lr": 0.01, "step_size_up": 8, "mode": "exp_range", "gamma": 0.98,
                          "base_momentum": 0.7, "max_momentum": 0.95}, "beta1"),
    "cyclic_no_momentum": (torch.optim.Adagrad, {"lr": 0.1}, S.CyclicLR,
                           {"base_lr": 0.01, "max_lr": 0.05, "step_size_up": 20, "cycle_momentum": False}, None),
    # scale_mode given: torch keeps the mode's own without a scale_fn
    "cyclic_scale_mode": (torch.optim.SGD, {"lr": 0.1, "momentum": 0.5}, S.CyclicLR,
                          {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 7, "mode": "triangular2",
                           "scale_mode": "iterations"}, "momentum"),
    # T_max well inside the 100 steps: past it the lr rises again
    "cosine_annealing": (torch.optim.SGD, {"lr": 0.1}, S.CosineAnnealingLR, {"T_max": 10, "eta_min": 0.001}, None),
    "one_cycle": (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}, S.OneCycleLR, {"max_lr": 0.1, "total_steps": 100},
                  "momentum"),
    "one_cycle_linear": (torch.optim.Adam, {"lr": 0.1}, S.OneCycleLR,
                         {"max_lr": 0.05, "total_steps": 120, "pct_start": 0.25, "anneal_strategy": "linear",
                          "div_factor": 10.0, "final_div_factor": 100.0}, "beta1"),
    "one_cycle_three_phase": (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}, S.OneCycleLR,
                              {"max_lr": 0.2, "total_steps": 100, "three_phase": True, "base_momentum": 0.8,
                               "max_momentum": 0.9}, "momentum"),
    "linear": (torch.optim.SGD, {"lr": 0.1}, S.LinearLR, {}, None),
    "linear_args": (torch.optim.SGD, {"lr": 0.1}, S.LinearLR,
                    {"start_factor": 0.25, "end_factor": 0.75, "total_iters": 40}, None),
    "polynomial": (torch.optim.SGD, {"lr": 0.1}, S.PolynomialLR, {}, None),
    "polynomial_args": (torch.optim.SGD, {"lr": 0.1}, S.PolynomialLR, {"total_iters": 60, "power": 2.0}, None),
}


def export_optimizer(out: Path, case: str, cls, kwargs: dict, late: bool = False) -> None:
    generator = torch.Generator().manual_seed(7)
    params = [torch.randn(shape, generator=generator).requires_grad_() for shape in SHAPES]
    grads = [torch.randn((STEPS, *shape), generator=generator) for shape in SHAPES]
    for i, p in enumerate(params):
        torch.save(p.detach().clone(), out / f"{case}_start_{i}.pt")
        torch.save(grads[i], out / f"{case}_grads_{i}.pt")
    optimizer = cls(params, **kwargs)
    trajectory = [[] for _ in params]
    for step in range(STEPS):
        for i, p in enumerate(params):
            p.grad = None if late and i == 1 and step < LATE else grads[i][step].clone()
        optimizer.step()
        for i, p in enumerate(params):
            trajectory[i].append(p.detach().clone())
    for i in range(len(params)):
        torch.save(torch.stack(trajectory[i]), out / f"{case}_trajectory_{i}.pt")


def export_optimizers(out: Path) -> None:
    for case, (cls, kwargs) in OPTIMIZERS.items():
        export_optimizer(out, case, cls, kwargs)
    for case, (cls, kwargs, late) in KERNEL_CASES.items():
        export_optimizer(out, case, cls, kwargs, late)


def momentum_of(group: dict, which: str) -> float:
    return group["betas"][0] if which == "beta1" else group["momentum"]


def export_schedulers(out: Path) -> None:
    for case, (opt_cls, opt_kwargs, cls, kwargs, which) in SCHEDULERS.items():
        param = torch.zeros(3, requires_grad=True)
        optimizer = opt_cls([param], **opt_kwargs)
        scheduler = cls(optimizer, **kwargs)
        lrs, momenta = [], []
        for step in range(STEPS + 1):
            group = optimizer.param_groups[0]
            lrs.append(group["lr"])
            if which:
                momenta.append(momentum_of(group, which))
            if step < STEPS:
                param.grad = torch.ones(3)
                optimizer.step()
                scheduler.step()
        torch.save(torch.tensor(lrs, dtype=torch.float64), out / f"{case}_lrs.pt")
        if which:
            torch.save(torch.tensor(momenta, dtype=torch.float64), out / f"{case}_momenta.pt")


def export_clipping(out: Path) -> None:
    generator = torch.Generator().manual_seed(3)
    grads = [torch.randn(shape, generator=generator) * 3 for shape in SHAPES]
    for i, g in enumerate(grads):
        torch.save(g, out / f"clip_grads_{i}.pt")
    params = [torch.zeros_like(g, requires_grad=True) for g in grads]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    total = torch.nn.utils.clip_grad_norm_(params, max_norm=1.5)
    torch.save(total.reshape(1).to(torch.float64), out / "clip_total_norm.pt")
    for i, p in enumerate(params):
        torch.save(p.grad, out / f"clip_norm_{i}.pt")
        p.grad = grads[i].clone()
    torch.nn.utils.clip_grad_value_(params, clip_value=0.5)
    for i, p in enumerate(params):
        torch.save(p.grad, out / f"clip_value_{i}.pt")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["export"])
    parser.add_argument("dir", type=Path)
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    export_optimizers(args.dir)
    export_schedulers(args.dir)
    export_clipping(args.dir)


if __name__ == "__main__":
    main()
