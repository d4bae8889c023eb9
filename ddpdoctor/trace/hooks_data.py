"""DataLoader passes: per rank and per pass, what the index sampler drew (as digests and a
bottom-k sketch) or, for iterable datasets, a fingerprint of every batch; the batch count,
whether the pass ended, set_epoch, and how long the loop waited for data."""

from __future__ import annotations

import contextlib
import hashlib
import time
import weakref
from typing import Any

from ddpdoctor.trace.digest import MASK, ItemSketch
from ddpdoctor.trace.patching import wrap
from ddpdoctor.trace.record import BEFORE_INIT, DataPass
from ddpdoctor.trace.sites import Site
from ddpdoctor.trace.state import Tracer, site


def _as_int(item: Any) -> int:
    if isinstance(item, int):
        return item
    try:
        return int(item)  # numpy and 0-d tensor indices
    except (TypeError, ValueError):
        digest = hashlib.blake2b(repr(item).encode(), digest_size=8).digest()
        return int.from_bytes(digest, "little") & MASK


def batch_fingerprint(batch: Any) -> int:
    """A cheap, deterministic fingerprint of a batch: shape and sums of its first tensor."""
    first = batch
    while isinstance(first, (list, tuple)) and first:
        first = first[0]
    if isinstance(first, dict) and first:
        first = next(iter(first.values()))
    if hasattr(first, "shape") and hasattr(first, "double"):
        d = first.detach().double()
        text = f"{tuple(first.shape)}|{d.sum().item():.12g}|{d.square().sum().item():.12g}"
    else:
        text = repr(first)[:512]
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


KEEP_SKETCHES = 2  # per loader: the first pass and the last ones keep their sketches


def _prune(passes: list[DataPass], loader: int) -> None:
    """Bounded memory over long runs: older passes keep their digests and counts only."""
    mine = [p for p in passes if p.loader == loader and p.complete and p.epoch > 0]
    for p in mine[:-KEEP_SKETCHES]:
        p.sketch = []


class PassIterator:
    """Wraps the DataLoader's own iterator: times next(), counts batches, ends the pass."""

    def __init__(self, tracer: Tracer, pass_: DataPass, sketch: ItemSketch, inner: Any) -> None:
        self._tracer, self._pass, self._sketch, self._inner = tracer, pass_, sketch, inner
        self._by_batch = pass_.kind == "batches"

    def __iter__(self) -> PassIterator:
        return self

    def __len__(self) -> int:
        return len(self._inner)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __next__(self) -> Any:
        t = time.perf_counter()
        try:
            batch = next(self._inner)
        except StopIteration:
            self._finish(complete=True)
            raise
        self._tracer.data_waited(time.perf_counter() - t)
        p = self._pass
        p.batches += 1
        if self._by_batch:
            self._sketch.add(batch_fingerprint(batch))
            self._sync()
        elif p.batches % 64 == 0:
            self._sync()
        self._tracer.dirty = True
        return batch

    def _sync(self) -> None:
        p, s = self._pass, self._sketch
        p.items, p.order_digest, p.set_digest = s.count, s.order_digest, s.set_digest
        if p.batches <= 8 or p.batches % 64 == 0:  # the sketch is the costly part: not per batch
            p.sketch = s.sketch()

    def _finish(self, complete: bool) -> None:
        with self._tracer.lock:
            p, s = self._pass, self._sketch
            p.complete = complete
            p.items, p.order_digest, p.set_digest = s.count, s.order_digest, s.set_digest
            p.sketch = s.sketch()
            _prune(self._tracer.record.passes, p.loader)
        self._tracer.write()

    def flush(self) -> None:
        """A loop left early (break, --steps, exit): keep the last figures, sketch included."""
        if not self._pass.complete:
            with self._tracer.lock:
                self._sync()
                self._pass.sketch = self._sketch.sketch()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # never raise from a finaliser
            self.flush()


def install(tracer: Tracer) -> None:
    from torch.utils.data import DataLoader, DistributedSampler, IterableDataset, RandomSampler

    loaders: weakref.WeakKeyDictionary[Any, tuple[int, Site | None, int]] = (
        weakref.WeakKeyDictionary()
    )
    sampler_sites: weakref.WeakKeyDictionary[Any, Site | None] = weakref.WeakKeyDictionary()
    epochs: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
    claims: dict[int, ItemSketch] = {}  # id(index sampler) -> the sketch of the pass starting
    patched: set[type] = set()
    counter = [0]

    def loader_init(original: Any) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            loaders[self] = (counter[0], site(), 0)
            counter[0] += 1

        return __init__

    def sampler_iter(original: Any) -> Any:
        def __iter__(self: Any) -> Any:
            sketch = claims.pop(id(self), None)
            it = original(self)
            if sketch is None:
                return it
            return _recording(it, sketch)

        return __iter__

    def _recording(it: Any, sketch: ItemSketch) -> Any:
        for item in it:
            if isinstance(item, list) and item and type(item[0]) is int:
                sketch.add_many(item)  # a batch sampler's list of indices: the common case
            elif isinstance(item, (list, tuple)):
                sketch.add_many([_as_int(i) for i in item])
            else:
                sketch.add(_as_int(item))
            yield item

    def loader_iter(original: Any) -> Any:
        def __iter__(self: Any) -> Any:
            known = loaders.get(self)
            if known is None:  # built before the tracer (cannot happen under runpy) : pass through
                return original(self)
            ordinal, created, passes = known
            loaders[self] = (ordinal, created, passes + 1)
            iterable = isinstance(self.dataset, IterableDataset)
            index_sampler = self.batch_sampler if self.batch_sampler is not None else self.sampler
            inner_sampler = getattr(self.batch_sampler, "sampler", None) or self.sampler
            distributed = isinstance(inner_sampler, DistributedSampler)
            shuffle = (
                getattr(inner_sampler, "shuffle", None)
                if distributed
                else isinstance(inner_sampler, RandomSampler)
            )
            try:
                length = None if iterable else len(self.dataset)
            except TypeError:
                length = None
            p = DataPass(
                loader=ordinal, epoch=passes, created=created, where=site(),
                kind="batches" if iterable else "indices", sampler=type(inner_sampler).__name__,
                distributed=distributed, shuffle=shuffle, sampler_site=sampler_sites.get(inner_sampler),
                set_epoch=epochs.get(inner_sampler), dataset_len=length,
            )  # fmt: skip
            sketch = ItemSketch()
            if not iterable:
                cls = type(index_sampler)
                if cls not in patched:
                    patched.add(cls)
                    wrap(cls, "__iter__", sampler_iter)
                claims[id(index_sampler)] = sketch
            with tracer.lock:
                tracer.record.passes.append(p)
                tracer.dirty = True
            try:
                inner = original(self)
            finally:
                claims.pop(id(index_sampler), None)
            it = PassIterator(tracer, p, sketch, inner)
            tracer.open_passes.add(it)
            return it

        return __iter__

    def dsampler_init(original: Any) -> Any:
        def __init__(
            self: Any, dataset: Any, num_replicas: Any = None, rank: Any = None, *a: Any, **k: Any
        ) -> None:
            where = site()
            sampler_sites[self] = where
            import torch.distributed as dist

            if (num_replicas is None or rank is None) and not dist.is_initialized():
                tracer.event(BEFORE_INIT, where, what="sampler")
            original(self, dataset, num_replicas, rank, *a, **k)

        return __init__

    def set_epoch(original: Any) -> Any:
        def set_epoch(self: Any, epoch: int) -> None:
            epochs[self] = int(epoch)
            original(self, epoch)

        return set_epoch

    wrap(DataLoader, "__init__", loader_init)
    wrap(DataLoader, "__iter__", loader_iter)
    wrap(DistributedSampler, "__init__", dsampler_init)
    wrap(DistributedSampler, "set_epoch", set_epoch)
