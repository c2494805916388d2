"""Several processes under ``accelerate launch`` (or ``torchrun``): ranks, agreement, sharding.

Training averages the LoRA gradients itself (:mod:`.train`), so all this module needs from
accelerate is the process group, which :func:`start` has ``PartialState`` set up (gloo on CPU,
NCCL on CUDA). Everything else is three collectives of ``torch.distributed``: a barrier, a
check that every rank holds the same value, and gathering every rank's share of the queries.

A process that was not launched with several ranks (``WORLD_SIZE`` unset or 1) never imports
accelerate and sees rank 0 of 1: every helper is then a no-op.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from searchtome.errors import SearchTomeError

T = TypeVar("T")
V = TypeVar("V")

# accelerate's launcher exports these for --use_deepspeed / --use_fsdp (accelerate/utils/launch.py).
SHARDING_SWITCHES = ("ACCELERATE_USE_DEEPSPEED", "ACCELERATE_USE_FSDP")


def distributed() -> tuple[int, int]:
    """``(rank, world size)`` of this process; ``(0, 1)`` outside a multi-process launch."""
    torch = sys.modules.get("torch")  # not imported: certainly not distributed
    if (
        torch is not None
        and torch.distributed.is_available()
        and torch.distributed.is_initialized()
    ):
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def is_main() -> bool:
    """Whether this process writes shared files (rank 0, or the only process)."""
    return distributed()[0] == 0


def start(device: str) -> str:
    """Join the process group when launched with several processes; the device to use.

    ``accelerate launch --cpu`` starts one process unless given an MPI host file, so on a CPU
    machine several processes come from ``accelerate launch --multi_gpu`` (torchrun underneath)
    with ``--set device=cpu``; ``PartialState(cpu=True)`` then picks gloo instead of looking for GPUs.
    """
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return device
    on = [name for name in SHARDING_SWITCHES if os.environ.get(name, "").lower() == "true"]
    if on:
        raise SearchTomeError(
            f"{on[0]} is set, but the STAIR/DSI training loop averages LoRA gradients itself "
            "(data parallel) and shards nothing with DeepSpeed or FSDP; launch with "
            "`accelerate launch --multi_gpu --num_processes N` instead"
        )
    import torch
    from accelerate import PartialState

    cpu = device == "cpu" or (device == "auto" and not torch.cuda.is_available())
    return str(PartialState(cpu=cpu).device)


def barrier() -> None:
    """Wait for every rank (no-op in one process)."""
    if distributed()[1] > 1:
        import torch

        torch.distributed.barrier()


def from_main(value: T) -> T:
    """Rank 0's ``value`` on every rank (e.g. what rank 0 read from a file)."""
    if distributed()[1] == 1:
        return value
    import torch

    box = [value]
    torch.distributed.broadcast_object_list(box, src=0)
    return box[0]


def same_everywhere(value: Any, what: str) -> None:
    """Refuse to go on when the ranks disagree about ``value`` (e.g. whether a cached adapter
    exists: ranks that do not share a file system would otherwise train apart and hang)."""
    rank, world = distributed()
    if world == 1:
        return
    import torch

    seen: list[Any] = [None] * world
    torch.distributed.all_gather_object(seen, value)
    if any(v != seen[0] for v in seen):
        raise SearchTomeError(
            f"rank {rank} of {world}: the processes disagree about {what} ({seen!r}); "
            "every process must see the same $SEARCHTOME_HOME (a shared file system)"
        )


def shard(items: Sequence[T]) -> Sequence[T]:
    """This rank's contiguous share of ``items``; the first ``len % world`` ranks get one more
    (the split of accelerate's ``split_between_processes``, without its import)."""
    rank, world = distributed()
    if world == 1:
        return items
    size, extra = divmod(len(items), world)
    lo = rank * size + min(rank, extra)
    return items[lo : lo + size + (1 if rank < extra else 0)]


def run_sharded(items: Sequence[T], work: Callable[[Sequence[T]], dict[str, V]]) -> dict[str, V]:
    """``work`` on this rank's share of ``items``; every rank gets the union of all shares."""
    mine = work(shard(items))
    world = distributed()[1]
    if world == 1:
        return mine
    import torch

    parts: list[dict[str, V]] = [{} for _ in range(world)]
    torch.distributed.all_gather_object(parts, mine)
    merged: dict[str, V] = {}
    for part in parts:
        merged.update(part)
    return merged
