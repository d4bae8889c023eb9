"""Recall next to precision: break one thing in a clean fixture and the matching rule must fire
(and the rest of the file must stay quiet)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpdoctor.lint import lint_source

FIXTURES = Path(__file__).parent.parent / "fixtures" / "lint"

MUTATIONS = [
    (
        "clean_imagenet_style.py",
        "        if args.distributed:\n            train_sampler.set_epoch(epoch)\n",
        "",
        "DDL003",
    ),
    (
        "clean_imagenet_style.py",
        "        train_sampler = torch.utils.data.distributed.DistributedSampler(train_dataset)",
        "        train_sampler = None",
        "DDL002",
    ),
    (
        "clean_gpt_single_file.py",
        "    scaler.step(optimizer)\n    scaler.update()\n    optimizer.zero_grad(set_to_none=True)",
        "    optimizer.zero_grad(set_to_none=True)\n    scaler.step(optimizer)\n    scaler.update()",
        "DDL005",
    ),
    (
        "clean_gpt_single_file.py",
        "    if grad_clip != 0.0:\n        scaler.unscale_(optimizer)\n",
        "    if grad_clip != 0.0:\n",
        "DDL005",
    ),
    (
        "clean_gpt_single_file.py",
        "model = DDP(model, device_ids=[ddp_local_rank])",
        "model = DDP(model, device_ids=[ddp_rank])",
        "DDL004",
    ),
    (
        "clean_tutorial_trainer.py",
        "if self.gpu_id == 0 and epoch % self.save_every == 0:",
        "if epoch % self.save_every == 0:",
        "DDL006",
    ),
    (
        "clean_research_style.py",
        "        if not is_main_process():\n            return\n",
        "",
        "DDL006",
    ),
    (
        "clean_spawn_workers.py",
        "    setup(rank, world_size)\n",
        "",
        "DDL001",
    ),
    (
        "clean_spawn_workers.py",
        "def cleanup():\n    dist.destroy_process_group()",
        "def cleanup():\n    pass",
        "DDL007",
    ),
]


@pytest.mark.parametrize(
    ("name", "old", "new", "code"), MUTATIONS, ids=[f"{m[0]}-{m[3]}" for m in MUTATIONS]
)
def test_breaking_a_clean_script_is_caught(name: str, old: str, new: str, code: str) -> None:
    source = (FIXTURES / name).read_text()
    assert old in source
    codes = {f.code for f in lint_source(source.replace(old, new, 1), name)}
    assert codes == {code}
