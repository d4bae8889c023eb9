"""The hooks record and pass through: the same seeded training (DataLoader, GradScaler with
unscale_ and clipping, zero_grad, torch.save, open for writing) gives bit-identical parameters
with and without the tracer, in one process; and what was recorded on the way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from ddpdoctor.trace import record as R  # noqa: E402
from ddpdoctor.trace.install import install, uninstall  # noqa: E402
from ddpdoctor.trace.state import Config, Tracer  # noqa: E402


def train(out: Path) -> list:
    from torch.utils.data import DataLoader, TensorDataset

    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(32, 8, generator=g), torch.randn(32, 1, generator=g))
    loader = DataLoader(data, batch_size=4, shuffle=True, generator=g)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    for _epoch in range(2):
        for x, y in loader:
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = torch.nn.functional.mse_loss(model(x).float(), y)
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            scaler.step(opt)
            scaler.update()
    torch.save(model.state_dict(), out / "model.pt")
    with open(out / "log.txt", "w") as fh:
        fh.write("done")
    return [p.detach().clone() for p in model.parameters()]


def test_results_are_bit_identical_with_the_tracer(tmp_path: Path) -> None:
    plain = train(tmp_path)
    tracer = Tracer(Config(tmp_path / "run", steps=0), "test", [])
    (tmp_path / "run").mkdir()
    install(tracer)
    try:
        traced = train(tmp_path)
    finally:
        uninstall(tracer)
    assert all(torch.equal(a, b) for a, b in zip(plain, traced, strict=True))
    rec = tracer.record
    assert rec.steps == 16 and rec.skipped_count == 0
    assert [(p.epoch, p.batches, p.items, p.complete) for p in rec.passes] == [
        (0, 8, 32, True),
        (1, 8, 32, True),
    ]
    assert rec.passes[0].order_digest != rec.passes[1].order_digest  # RandomSampler reshuffles
    assert rec.passes[0].set_digest == rec.passes[1].set_digest  # the same 32 samples
    assert [e.kind for e in rec.events] == [R.SCALER_CREATED]  # the right order: nothing else
    assert {(Path(w.path).name, w.api) for w in rec.writes} == {
        ("model.pt", "torch.save"),
        ("log.txt", "open"),
    }
    assert len(rec.fingerprints) == 2 and rec.scales  # steps 1 and 10
    for hooked in (torch.nn.utils.clip_grad_norm_, torch.save, torch.Tensor.backward, open):
        assert not hasattr(hooked, "__ddpdoctor_original__")  # every hook removed again
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(R.__file__).parent / "trace-1.schema.json").read_text())
    jsonschema.validate(json.loads(json.dumps(rec.to_json())), schema)


def test_sketch_with_and_without_numpy_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    from ddpdoctor.trace import digest

    with_np = digest.ItemSketch()
    for j in range(40):
        with_np.add_many(list(range(64 * j, 64 * j + 64)))
    monkeypatch.setattr(digest, "_np", None)
    pure = digest.ItemSketch()
    for j in range(40):
        pure.add_many(list(range(64 * j, 64 * j + 64)))
    assert (with_np.order_digest, with_np.set_digest, with_np.sketch()) == (
        pure.order_digest, pure.set_digest, pure.sketch())  # fmt: skip


def test_older_passes_keep_digests_only() -> None:
    from ddpdoctor.trace.hooks_data import _prune
    from ddpdoctor.trace.record import DataPass

    passes = [DataPass(0, e, complete=True, sketch=[1, 2]) for e in range(5)]
    _prune(passes, 0)
    assert [bool(p.sketch) for p in passes] == [True, False, False, True, True]
