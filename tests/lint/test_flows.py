"""Value and call flows the rules must follow (or must not guess through), one snippet each.
Each case is a small script and the (line, code) pairs it must produce; [] means silent."""

from __future__ import annotations

import ast
import textwrap

import pytest

from ddpdoctor.lint import lint_source
from ddpdoctor.lint.guards import implies_rank0

HEAD = """\
import os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
"""
HEAD_LINES = HEAD.count("\n")


def lint(body: str, select: tuple[str, ...] = ()) -> list[tuple[int, str]]:
    source = HEAD + textwrap.dedent(body)
    found = [(f.line - HEAD_LINES, f.code) for f in lint_source(source)]
    return [f for f in found if not select or f[1] in select]


TRAIN_AND_SAVE = """
def main():
    dist.init_process_group("nccl")
    model = DDP(torch.nn.Linear(2, 2).to(0), device_ids=[0])
    for step in range(10):
        model(torch.ones(2)).sum().backward()
        save(model, "ckpt.pt")
    dist.destroy_process_group()

if __name__ == "__main__":
    main()
"""

CASES = {
    "sampler on self, set_epoch in a method the loop calls": (
        """\
        class Runner:
            def __init__(self, ds):
                self.sampler = DistributedSampler(ds)
                self.loader = DataLoader(ds, sampler=self.sampler)

            def one_epoch(self, epoch):
                self.sampler.set_epoch(epoch)
                for batch in self.loader:
                    batch.sum().backward()

            def fit(self, epochs):
                for epoch in range(epochs):
                    self.one_epoch(epoch)
        """,
        [],
    ),
    "sampler from a helper returning a tuple, never set": (
        """\
        def build(ds):
            sampler = DistributedSampler(ds)
            return DataLoader(ds, sampler=sampler), sampler

        loader, sampler = build(dataset)
        for epoch in range(3):
            for batch in loader:
                batch.sum().backward()
        """,
        [(2, "DDL003")],
    ),
    "loader from a helper, sampler reached through loader.sampler in a while loop": (
        """\
        def build(ds):
            return DataLoader(ds, sampler=DistributedSampler(ds))

        loader = build(dataset)
        epoch = 0
        while epoch < 10:
            loader.sampler.set_epoch(epoch)
            for batch in loader:
                batch.sum().backward()
            epoch += 1
        """,
        [],
    ),
    "batch sampler wrapping a DistributedSampler": (
        """\
        from torch.utils.data import BatchSampler
        dist.init_process_group("nccl")
        sampler = DistributedSampler(dataset)
        train_loader = DataLoader(dataset, batch_sampler=BatchSampler(sampler, 32, True))
        for epoch in range(3):
            for batch in train_loader:
                batch.sum().backward()
        dist.destroy_process_group()
        """,
        [(3, "DDL003")],
    ),
    "sampler assigned None then replaced under a condition": (
        """\
        dist.init_process_group("nccl")
        train_sampler = None
        if dist.get_world_size() > 1:
            train_sampler = DistributedSampler(dataset)
        train_loader = DataLoader(dataset, sampler=train_sampler, shuffle=train_sampler is None)
        dist.destroy_process_group()
        """,
        [],
    ),
    "dataset sharded by rank through a helper": (
        """\
        def shard(ds):
            return torch.utils.data.Subset(ds, range(dist.get_rank(), len(ds), 2))

        dist.init_process_group("nccl")
        train_loader = DataLoader(shard(dataset), batch_size=8, shuffle=True)
        dist.destroy_process_group()
        """,
        [],
    ),
    "a streaming dataset shards itself": (
        """\
        from datasets import load_dataset
        dist.init_process_group("nccl")
        train_ds = load_dataset("c4", split="train", streaming=True)
        train_loader = DataLoader(train_ds, batch_size=8)
        dist.destroy_process_group()
        """,
        [],
    ),
    "a data module builds the sampler; the epoch loop lives elsewhere": (
        """\
        def build_loaders(datasets):
            loaders = {}
            for name, ds in datasets.items():
                loaders[name] = DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds))
            return loaders
        """,
        [],
    ),
    "loader names are read word by word": (
        """\
        dist.init_process_group("nccl")
        constrained_loader = DataLoader(dataset, batch_size=4)
        dl_train = DataLoader(dataset, batch_size=4)
        train_eval_loader = DataLoader(dataset, batch_size=4)
        dist.destroy_process_group()
        """,
        [(3, "DDL002")],
    ),
    "worker that calls a local setup helper first": (
        """\
        import torch.multiprocessing as mp

        def setup(rank, world):
            dist.init_process_group("gloo", rank=rank, world_size=world)

        def worker(rank, world):
            setup(rank, world)
            dist.barrier()
            dist.destroy_process_group()

        if __name__ == "__main__":
            mp.spawn(worker, args=(2,), nprocs=2)
        """,
        [],
    ),
    "group set up in the parent only": (
        """\
        import torch.multiprocessing as mp

        def worker(rank, world):
            dist.all_reduce(torch.ones(1))

        if __name__ == "__main__":
            dist.init_process_group("gloo")
            mp.spawn(worker, args=(2,), nprocs=2)
            dist.destroy_process_group()
        """,
        [(4, "DDL001")],
    ),
    "a rank helper that checks is_initialized is safe before init": (
        """\
        def get_rank():
            if not dist.is_initialized():
                return 0
            return dist.get_rank()

        print(get_rank())
        dist.init_process_group("nccl")
        dist.destroy_process_group()
        """,
        [],
    ),
    "asking for the rank inside try/except is deliberate": (
        """\
        try:
            rank = dist.get_rank()
        except (RuntimeError, ValueError):
            rank = 0
        dist.init_process_group("nccl")
        dist.destroy_process_group()
        """,
        [],
    ),
    "re-initialising after destroy is not use-before-init": (
        """\
        def restart():
            dist.destroy_process_group()
            dist.barrier()
            dist.init_process_group("gloo")

        dist.init_process_group("gloo")
        restart()
        dist.destroy_process_group()
        """,
        [],
    ),
    "teardown handed to atexit": (
        """\
        import atexit

        def main():
            dist.init_process_group("nccl")
            atexit.register(dist.destroy_process_group)

        if __name__ == "__main__":
            main()
        """,
        [],
    ),
    "stdout silenced off rank 0, prints in the loop are fine": (
        """\
        import sys
        dist.init_process_group("nccl")
        if dist.get_rank() != 0:
            sys.stdout = open(os.devnull, "w")
        gpu = int(os.environ["LOCAL_RANK"])
        model = DDP(torch.nn.Linear(2, 2).cuda(gpu), device_ids=[gpu])
        for step in range(10):
            model(torch.ones(2)).sum().backward()
            print(step)
        dist.destroy_process_group()
        """,
        [],
    ),
    "a save helper guarded inside, called from the loop": (
        textwrap.dedent(
            """\
        def save(model, path):
            if dist.get_rank() != 0:
                return
            torch.save(model.state_dict(), path)
        """
        )
        + TRAIN_AND_SAVE,
        [],
    ),
    "the same save helper without its guard": (
        textwrap.dedent(
            """\
        def save(model, path):
            torch.save(model.state_dict(), path)
        """
        )
        + TRAIN_AND_SAVE,
        [(2, "DDL006")],
    ),
    "the launcher that spawns the ranks runs once": (
        """\
        import json
        import torch.multiprocessing as mp

        def worker(rank, world):
            dist.init_process_group("gloo", rank=rank, world_size=world)
            torch.ones(1, requires_grad=True).sum().backward()
            torch.save({}, "ckpt.pt")
            dist.destroy_process_group()

        def main():
            with open("config.json", "w") as fh:
                json.dump({"world": 2}, fh)
            mp.spawn(worker, args=(2,), nprocs=2)

        if __name__ == "__main__":
            main()
            torch.save({}, "done.pt")
        """,
        [(7, "DDL006")],
    ),
    "a model made by a local factory and moved after wrapping": (
        """\
        def make_model():
            return torch.nn.Linear(2, 2)

        local_rank = int(os.environ["LOCAL_RANK"])
        dist.init_process_group("nccl")
        torch.cuda.set_device(local_rank)
        model = make_model()
        ddp_model = DDP(model, device_ids=[local_rank])
        ddp_model.cuda(local_rank)
        dist.destroy_process_group()
        """,
        [(8, "DDL004")],
    ),
    "a model passed in by the caller is not judged": (
        """\
        def wrap(model, local_rank):
            ddp = DDP(model, device_ids=[local_rank])
            ddp.to(local_rank)
            return ddp

        dist.init_process_group("nccl")
        dist.destroy_process_group()
        """,
        [],
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_flow(name: str) -> None:
    body, expected = CASES[name]
    assert lint(body) == expected


GUARDS = {
    "rank == 0": True,
    "0 == rank": True,
    "local_rank == 0": True,
    "dist.get_rank() == 0": True,
    "master_process": True,
    "is_main_process()": True,
    "accelerator.is_main_process": True,
    "self.gpu_id == 0": True,
    "args.rank % ngpus_per_node == 0": True,
    "not rank": True,
    "args.local_rank in [-1, 0]": True,
    "rank <= 0": True,
    "is_master and epoch % 10 == 0": True,
    "not args.multiprocessing_distributed or (args.multiprocessing_distributed "
    "and args.rank % ngpus_per_node == 0)": True,
    "not args.distributed or dist.get_rank() == 0": True,
    'int(os.environ["RANK"]) == 0': True,
    "int(os.environ.get('RANK', 0)) == 0": True,
    'os.environ.get("LOCAL_RANK") == "0"': True,
    "process_id == 0": True,
    'int(os.environ["WORLD_SIZE"]) == 1': False,
    'os.environ.get("RANK") == "1"': False,
    "rank != 0": False,
    "rank": False,
    "epoch % 10 == 0": False,
    "rank == 1": False,
    "rank == 0 or epoch == 5": False,
    "not master_process": False,
}


@pytest.mark.parametrize("test", list(GUARDS))
def test_rank0_guard(test: str) -> None:
    assert implies_rank0(ast.parse(test, mode="eval").body) is GUARDS[test]


@pytest.mark.parametrize(
    ("test", "expected"),
    [("rank != 0", True), ("not master_process", True), ("rank > 0", True), ("rank == 0", False)],
)
def test_early_exit_guards(test: str, expected: bool) -> None:
    assert implies_rank0(ast.parse(test, mode="eval").body, negated=True) is expected
