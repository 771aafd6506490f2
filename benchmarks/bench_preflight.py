"""Engine speed: `preflight check --all` on the shipped stacks, and plan + check of generated large stacks; and the
estimate of `pulumi up` -> first training step of each shipped stack.

Prints figures; asserts nothing (performance targets are read off these numbers, not enforced by tests).
Run with `make bench`. Targets: `check --all` under 3 s wall on a 2-core machine; time per resource flat as a
stack grows to ~2,000 resources (20 Trainium node groups plus Volcano queues). The machine's load average is printed
before and after the timed runs: a figure taken on a busy machine says so.
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from preflight import analysis, check, engine, stackfile

ROOT = stackfile.REPO_ROOT

RUNS = 3
NODE_GROUPS = 20
TARGETS = (500, 1000, 2000)


def time_check_all() -> list[float]:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "preflight", "check", "--all"], cwd=ROOT, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return times


def large_stack_file(directory: Path, queues: int) -> Path:
    """The staging stack with 20 trn1.32xlarge node groups and ``queues`` Volcano queues."""
    document = yaml.safe_load((ROOT / "stacks" / "Pulumi.staging.yaml").read_text())
    config = document["config"]
    config["trainium-eks:trainiumNodeGroups"] = [
        {"name": f"trn-{i:02d}", "instanceType": "trn1.32xlarge", "minSize": 0, "desiredSize": 1, "maxSize": 2}
        for i in range(NODE_GROUPS)
    ]
    config["trainium-eks:volcanoQueues"] = [{"name": f"team-{i:04d}", "weight": 1, "neuronShare": 0.05} for i in range(queues)]
    path = directory / f"Pulumi.large-{queues}.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} (1 / 5 / 15 min)"


def first_steps() -> None:
    """The first-step estimate of each shipped stack, as `preflight plan` prints it (image size not given)."""
    for stack in stackfile.stack_names():
        plan = analysis.annotate(engine.evaluate(stackfile.load(stack)).to_json())
        print(f"{stack}:")
        print("\n".join(f"  {line}" for line in analysis.first_steps(plan)))


def main() -> None:
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}")
    print(f"before: {load()}")
    times = time_check_all()
    print(f"after:  {load()}")
    resources = sum(len(engine.evaluate(stackfile.load(s)).resources) for s in stackfile.stack_names())
    median = statistics.median(times)
    print(
        f"check --all (3 stacks, {resources} resources, fresh process each run): "
        f"min {min(times):.2f} s, median {median:.2f} s, max {max(times):.2f} s; {resources / median:.0f} resources/s"
    )

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
