"""BERT pretraining, data parallel, on whatever the image provides: PyTorch/XLA on trn1, TorchNeuron (the ``neuron``
device) on trn2, or CPUs with gloo (``training/backend.py`` holds what differs; one training loop for all).

Launched by TorchX (``python -m jobs.launch``) as ``torchrun ... -m training.pretrain_bert``: one process per
NeuronCore, rendezvous through etcd. The model is Hugging Face's ``BertForPreTraining`` (``training/model.py``).
Each optimizer step accumulates gradients over ``--grad-accum-steps`` micro-batches; rank 0 logs throughput and
loss, writes TensorBoard events and checkpoints to the shared volume. Restarted workers (torchrun after a
failure, or Volcano restarting the job) resume from the newest checkpoint: the same weights, optimizer and
schedule, and the data stream from where that checkpoint left it, and only a run of the same model, world size and
backend (``training/run_record.py``; any other is refused in one line). On SIGTERM (a drained node) every worker stops
after the same step and rank 0 checkpoints it, so the resumed job loses no step (``training/drain.py``).
``--device cpu --model tiny`` runs anywhere.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import signal
import sys
import time
from contextlib import nullcontext

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

from training import backend as backends
from training import checkpoint, options, run_record
from training import model as bert
from training.data import ShardDataset
from training.drain import Drain


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return options.parser().parse_args(argv)


def learning_rate(step: int, warmup: int, total: int) -> float:
    """Linear warm-up, then linear decay to zero: the factor applied to --lr."""
    if step < warmup:
        return (step + 1) / warmup
    return max(0.0, (total - step) / max(1, total - warmup))


def fail_here(rank: int, world: int, distributed: bool, backend: backends.Backend) -> None:
    """``--fail-at-step``: the last worker dies by SIGKILL, as an OOM kill would, once every worker has trained the
    step (so rank 0 has logged it and written its checkpoint, if the step has one): what a rehearsal retrains is
    then exactly the steps since that checkpoint."""
    if distributed:
        backend.barrier()
    if rank == world - 1:
        os.kill(os.getpid(), signal.SIGKILL)


def micro_batches(loader: DataLoader, sampler: DistributedSampler, consumed: int):
    """The endless stream of micro-batches, starting after the first ``consumed`` (a resumed run goes on with
    the data where its checkpoint left it instead of starting the epoch again)."""
    per_epoch = len(loader)
    epoch, skip = divmod(consumed, per_epoch)
    while True:
        sampler.set_epoch(epoch)
        batches = iter(loader)
        if skip:
            indices = list(sampler)[skip * loader.batch_size :]
            batches = iter(DataLoader(loader.dataset, batch_size=loader.batch_size, sampler=indices, drop_last=True))
            skip = 0
        yield from batches
        epoch += 1


def claim_output_dir(args: argparse.Namespace, backend: backends.Backend, rank: int, world: int, distributed: bool) -> None:
    """Stop every worker, with exit status 2 and rank 0's one line, if ``--output-dir`` holds another run's
    checkpoints (``training.run_record``): rank 0 checks, the others learn its verdict. Each restart meets the same
    refusal, so torchrun's and Volcano's restarts end in a failed job rather than a run resumed from another's step."""
    refusal = None
    if rank == 0:
        identity = run_record.RunIdentity(model=bert.architecture(args.model), world_size=world, backend=backend.name)
        try:
            run_record.claim(args.output_dir, identity)
        except run_record.ResumeRefused as refused:
            refusal = str(refused)
    refused_by_rank_0 = backend.agree(refusal is not None, distributed)
    if refusal is not None:
        print(refusal, file=sys.stderr, flush=True)
    if refused_by_rank_0 or refusal is not None:  # rank 0 stops on its own verdict, whatever the collective returned
        if distributed:
            dist.destroy_process_group()
        raise SystemExit(2)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    try:
        backend = backends.select(args.device)
    except backends.MissingBackend as missing:
        print(missing, file=sys.stderr)
        raise SystemExit(2) from None
    with Drain() as drain:  # before anything slow: a SIGTERM from now on stops the run after a whole step
        return train(args, backend, drain)


def train(args: argparse.Namespace, backend: backends.Backend, drain: Drain) -> dict:
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    device = backend.device()
    if distributed:
        dist.init_process_group(backend.process_group)
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    torch.manual_seed(args.seed)

    args.output_dir.mkdir(parents=True, exist_ok=True)
    claim_output_dir(args, backend, rank, world, distributed)
    resume = checkpoint.latest(args.output_dir)
    network, state = checkpoint.load(resume) if resume else (bert.build(args.model), None)
    network.to(device)
    ddp = DistributedDataParallel(network) if distributed and backend.ddp else None
    model = backend.compile(ddp or network)
    optimizer = torch.optim.AdamW(network.parameters(), lr=args.lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: learning_rate(s, args.warmup_steps, args.max_steps))
    step = 0
    if state is not None:
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        step = state["step"]
    resumed_from = step  # 0 for a fresh start; else the checkpoint's step (its records follow a restart)

    dataset = ShardDataset(args.data_dir)
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=args.seed, drop_last=True)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    writer = None
    if rank == 0:
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(log_dir=str(args.tensorboard_dir or args.output_dir / "tensorboard"))
        if backend.compiler:
            cache = os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR", "its default")
            print(f"{backend.name}: torch.compile(backend={backend.compiler!r}), compiled graphs in {cache}", flush=True)
    metrics_path = args.output_dir / "metrics.jsonl"
    last_step = args.max_steps if args.steps_this_run < 0 else min(args.max_steps, step + args.steps_this_run)
    autocast = backend.autocast_context(args.bf16)
    history = []

    stream = micro_batches(loader, sampler, consumed=step * args.grad_accum_steps)
    while step < last_step:
        started = time.perf_counter()
        total = torch.zeros((), device=device)
        for micro in range(args.grad_accum_steps):
            batch = {k: v.to(device) for k, v in next(stream).items()}
            accumulating = ddp is not None and micro < args.grad_accum_steps - 1
            with ddp.no_sync() if accumulating else nullcontext(), autocast:  # all-reduce once per optimizer step
                loss = model(**batch).loss  # masked-LM plus next-sentence cross entropy
            (loss / args.grad_accum_steps).backward()
            total += loss.detach()
        backend.optimizer_step(optimizer)
        optimizer.zero_grad(set_to_none=True)
        schedule.step()
        step += 1

        if rank == 0 and (step % args.log_every == 0 or step == last_step):
            mean_loss = (total / args.grad_accum_steps).item()
            seconds = time.perf_counter() - started
            throughput = args.batch_size * args.grad_accum_steps * world / seconds
            record = {
                "step": step,
                "loss": mean_loss,
                "lr": schedule.get_last_lr()[0],
                "sequences_per_second": throughput,
                "resumed_from": resumed_from,
                "time": time.time(),
            }
            history.append(record)
            print(f"LOG step {step} loss {mean_loss:.4f} lr {record['lr']:.3e} throughput {throughput:.1f} seq/s", flush=True)
            with metrics_path.open("a") as log:
                log.write(json.dumps(record) + "\n")
            writer.add_scalar("loss", mean_loss, step)
            writer.add_scalar("learning_rate", record["lr"], step)
            writer.add_scalar("throughput", throughput, step)
            if not math.isfinite(mean_loss):
                raise SystemExit(f"loss became {mean_loss} at step {step}; lower --lr or check the data")
        saved = step % args.checkpoint_every == 0 or step == last_step
        if rank == 0 and saved:
            checkpoint.save(args.output_dir, step, network, optimizer, schedule)
        if step == args.fail_at_step and resumed_from == 0:  # every rank loaded the same checkpoint, or none
            fail_here(rank, world, distributed, backend)
        # After the step's checkpoint, so a drain writes at most one: its worst case is one step and one write.
        if step < last_step and drain.agreed(lambda signalled: backend.agree(signalled, distributed)):
            if rank == 0:
                if not saved:
                    checkpoint.save(args.output_dir, step, network, optimizer, schedule)
                print(f"DRAIN stopped after step {step} on SIGTERM; checkpoint-{step} holds it", flush=True)
            break
    if writer is not None:
        writer.close()
    if distributed:
        # DDP's reducer holds the process group; freed at exit, it would run gloo's destructor holding the GIL
        # while gloo's worker thread waits for the GIL, and hang (pytorch/pytorch#56297). Free it first, so the
        # group goes in destroy_process_group, which releases the GIL.
        del model, ddp
        gc.collect()
        dist.destroy_process_group()
    return {"steps": step, "history": history}


if __name__ == "__main__":
    main()
