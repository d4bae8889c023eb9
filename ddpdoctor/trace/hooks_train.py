"""The training step: optimizer steps (the run's step counter, timing, replica fingerprints,
stopping), backward, zero_grad, clipping, and the GradScaler call sequence."""

from __future__ import annotations

import weakref
from typing import Any

from ddpdoctor.trace import record as rec
from ddpdoctor.trace.fingerprint import fingerprint
from ddpdoctor.trace.patching import wrap
from ddpdoctor.trace.sites import caller_site
from ddpdoctor.trace.state import Tracer, site


class StepState:
    """What happened since the last optimizer step: enough to tell the order apart."""

    def __init__(self) -> None:
        self.backward = False  # a backward ran since the last step
        self.scaled = False  # ... and a GradScaler had scaled a loss before it
        self.unscaled = False  # unscale_ since then
        self.pending_update: Any = None  # site of a scaler.step() not followed by update()
        self.zeroed: Any = None  # (site, scaled) of a zero_grad after backward: a problem only
        # if a step follows with no backward in between (a cleanup after a no-step backward is fine)

    def stepping(self, tracer: Tracer) -> None:
        """A step is about to run: a zero_grad since the last backward emptied its gradients."""
        if self.zeroed is not None:
            where, scaled = self.zeroed
            tracer.event(rec.ZERO_GRAD_BEFORE_STEP, where, scaler=scaled)
            self.zeroed = None


def install(tracer: Tracer) -> None:
    import torch
    from torch.optim.optimizer import (
        Optimizer,
        register_optimizer_step_post_hook,
        register_optimizer_step_pre_hook,
    )

    st = StepState()
    scaler_sites: dict[Any, int] = {}
    scalers: weakref.WeakSet[Any] = weakref.WeakSet()

    def after_step(optimizer: Any, args: Any, kwargs: Any) -> None:
        new = tracer.optimizer_stepped(optimizer)
        st.backward = st.scaled = st.unscaled = False
        if not new:
            return
        if tracer.fingerprint_due():
            _take_fingerprint(tracer, optimizer)
        tracer.check_stop()

    def before_step(optimizer: Any, args: Any, kwargs: Any) -> None:
        st.stepping(tracer)

    tracer.hook_handles.append(register_optimizer_step_pre_hook(before_step))
    tracer.hook_handles.append(register_optimizer_step_post_hook(after_step))

    def backward_wrapper(original: Any) -> Any:
        def backward(self: Any, *args: Any, **kwargs: Any) -> Any:
            tracer.backward_started()
            st.backward = True
            st.zeroed = None
            return original(self, *args, **kwargs)

        return backward

    def zero_grad_wrapper(original: Any) -> Any:
        def zero_grad(self: Any, *args: Any, **kwargs: Any) -> Any:
            if st.backward and st.zeroed is None:
                st.zeroed = (site(), st.scaled)
            return original(self, *args, **kwargs)

        return zero_grad

    def clip_wrapper(original: Any) -> Any:
        def clip(*args: Any, **kwargs: Any) -> Any:
            if st.scaled and not st.unscaled:
                tracer.event(rec.CLIP_SCALED, site(), api=original.__name__)
            return original(*args, **kwargs)

        return clip

    def scaler_init(original: Any) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            if self in scalers:  # torch.cuda.amp.GradScaler runs the base __init__ too
                return
            scalers.add(self)
            where = site()
            n = scaler_sites.get(where, 0) + 1
            scaler_sites[where] = n
            tracer.event(
                rec.SCALER_CREATED, where, after_steps=tracer.record.steps,
                enabled=bool(getattr(self, "_enabled", True)),
            )  # fmt: skip

        return __init__

    def scale_wrapper(original: Any) -> Any:
        def scale(self: Any, outputs: Any) -> Any:
            if st.pending_update is not None:
                tracer.event(rec.STEP_WITHOUT_UPDATE, st.pending_update)
                st.pending_update = None
            st.scaled = True
            return original(self, outputs)

        return scale

    def unscale_wrapper(original: Any) -> Any:
        def unscale_(self: Any, optimizer: Any) -> Any:
            st.unscaled = True
            return original(self, optimizer)

        return unscale_

    def step_wrapper(original: Any) -> Any:
        def step(self: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
            before = tracer.record.steps
            where = site()
            st.stepping(tracer)  # torch raises here when zero_grad emptied the gradients
            st.pending_update = where
            out = original(self, optimizer, *args, **kwargs)
            if getattr(self, "_enabled", True) and tracer.record.steps == before:
                with tracer.lock:
                    tracer.record.skipped_count += 1
                    if len(tracer.record.skipped_steps) < 50:
                        tracer.record.skipped_steps.append(before + 1)
            return out

        return step

    def update_wrapper(original: Any) -> Any:
        def update(self: Any, *args: Any, **kwargs: Any) -> Any:
            st.pending_update = None
            out = original(self, *args, **kwargs)
            steps = tracer.record.steps
            k = tracer.config.fingerprint_every
            due = k and (steps <= 1 or steps % k == 0) and len(tracer.record.scales) < 256
            if due and getattr(self, "_enabled", True):
                tracer.record.scales[steps] = float(self.get_scale())
            return out

        return update

    wrap(torch.Tensor, "backward", backward_wrapper)
    wrap(Optimizer, "zero_grad", zero_grad_wrapper)
    wrap(torch.nn.Module, "zero_grad", zero_grad_wrapper)
    for name in ("clip_grad_norm_", "clip_grad_value_"):
        wrap(torch.nn.utils, name, clip_wrapper)
    scaler_cls = torch.amp.GradScaler
    wrap(scaler_cls, "__init__", scaler_init)
    wrap(scaler_cls, "scale", scale_wrapper)
    wrap(scaler_cls, "unscale_", unscale_wrapper)
    wrap(scaler_cls, "step", step_wrapper)
    wrap(scaler_cls, "update", update_wrapper)
    cuda_scaler = getattr(getattr(torch.cuda, "amp", None), "GradScaler", None)
    if (
        cuda_scaler is not None
        and cuda_scaler is not scaler_cls
        and "__init__" in cuda_scaler.__dict__
    ):
        wrap(cuda_scaler, "__init__", scaler_init)


def _take_fingerprint(tracer: Tracer, optimizer: Any) -> None:
    names, values = fingerprint(tracer.ddp_modules, optimizer)
    from ddpdoctor.trace.digest import seq_digest
    from ddpdoctor.trace.record import Fingerprint

    with tracer.lock:
        r = tracer.record
        if len(r.fingerprints) >= rec.MAX_FINGERPRINTS:
            return
        if not r.fingerprint_names:
            r.fingerprint_names = names
        r.fingerprints.append(Fingerprint(r.steps, values, seq_digest(names), caller_site(1)))
        tracer.dirty = True  # the side thread writes it within a second, off the step's path
