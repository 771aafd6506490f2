"""Engine speed: `preflight check --all` on the shipped stacks, and plan + check of generated large stacks; and the
estimate of `pulumi up` -> first training step of each shipped stack.

Prints figures; asserts nothing (performance targets are read off these numbers, not enforced by tests).
Run with `make bench`. Targets: `check --all` at most 3 s wall and 4 CPU-seconds (its processes' user + system time)
on a 2-core machine; time per resource flat as a stack grows to ~2,000 resources (20 Trainium node groups plus Volcano
queues). The machine's load average is printed before and after the timed runs: a figure taken on a busy machine says
so.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

from benchmarks.measure import ROOT, load, machine, spread, timed
from preflight import analysis, check, engine, stackfile

RUNS = 3
NODE_GROUPS = 20
TARGETS = (500, 1000, 2000)


def large_stack_file(directory: Path, queues: int) -> Path:
    """The staging stack with 20 trn1.32xlarge node groups and ``queues`` Volcano queues."""
    document = yaml.safe_load((ROOT / "stacks" / "Pulumi.staging.yaml").read_text())
    config = document["config"]
    config["trainium-eks:trainiumNodeGroups"] = [
        {"name": f"trn-{i:02d}", "instanceType": "trn1.32xlarge", "minSize": 0, "desiredSize": 1, "maxSize": 2}
        for i in range(NODE_GROUPS)
    ]
    # 0.5: the smallest share that holds a node of a 2-node group, which the config requires of every queue
    config["trainium-eks:volcanoQueues"] = [{"name": f"team-{i:04d}", "weight": 1, "neuronShare": 0.5} for i in range(queues)]
    path = directory / f"Pulumi.large-{queues}.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def first_steps() -> None:
    """The first-step estimate of each shipped stack, as `preflight plan` prints it (image size not given)."""
    for stack in stackfile.stack_names():
        plan = analysis.annotate(engine.evaluate(stackfile.load(stack)).to_json())
        print(f"{stack}:")
        print("\n".join(f"  {line}" for line in analysis.first_steps(plan)))


def main() -> None:
    print(machine())
    print(f"before: {load()}")
    walls, cpus = zip(*(timed([sys.executable, "-m", "preflight", "check", "--all"]) for _ in range(RUNS)), strict=True)
    print(f"after:  {load()}")
    names = stackfile.stack_names()
    resources = sum(len(engine.evaluate(stackfile.load(s)).resources) for s in names)
    print(f"check --all ({len(names)} stacks, {resources} resources, fresh process each run, {RUNS} runs):")
    print(f"  wall {spread(walls)}; {resources / statistics.median(walls):.0f} resources/s")
    print(f"  CPU  {spread(cpus)} (user + system, the command and its workers)")

    base = len(engine.evaluate(stackfile.load("staging", None)).resources)  # also warms the SDK imports
    per_queue = 1
    print(f"{'resources':>9} {'plan s':>8} {'plan res/s':>10} {'check s':>8} {'check res/s':>11} {'ms/resource':>11}")
    with tempfile.TemporaryDirectory() as directory:
        for target in TARGETS:
            queues = max(1, (target - base - NODE_GROUPS * 5) // per_queue)
            settings = stackfile.load("staging", large_stack_file(Path(directory), queues))
            start = time.perf_counter()
            plan = engine.evaluate(settings).to_json()
            planned = time.perf_counter()
            check.check_plan(plan, check.load_policy_config("staging"), "staging")
            checked = time.perf_counter()
            count = len(plan["resources"])
            plan_s, check_s = planned - start, checked - planned
            print(
                f"{count:>9} {plan_s:>8.2f} {count / plan_s:>10.0f} {check_s:>8.2f} {count / check_s:>11.0f} "
                f"{1000 * (plan_s + check_s) / count:>11.2f}"
            )
    print("`pulumi up` -> first training step (give `preflight plan STACK --image-gib N` to count the image pull):")
    first_steps()


if __name__ == "__main__":
    main()
