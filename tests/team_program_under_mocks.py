"""Runs a team's Pulumi program folder as `pulumi up` would, with the Pulumi SDK's mocks in place of the engine.

    python -I team_program_under_mocks.py PROGRAM_DIR STACK PLATFORM_OUTPUTS_JSON

The program's config comes from ``PULUMI_CONFIG``, as the Pulumi CLI passes it; its StackReference answers with the
platform outputs in the JSON file, and every other resource echoes its inputs. Prints, as JSON, the module the
program imported ``trainium_eks`` from and the resources it registered; a ``pulumi.RunError`` is printed as the CLI
prints it, one line, exit status 1. tests/test_consumer_example.py runs it with the Python of a virtualenv the
package was installed into, so it uses only the public SDK API and what that virtualenv holds.
"""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import pulumi
import yaml


class PlatformStackMocks(pulumi.runtime.Mocks):
    def __init__(self, outputs: dict):
        self.outputs = outputs
        self.registered: list[dict] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        self.registered.append({"type": args.typ, "name": args.name, "inputs": args.inputs})
        if args.typ == "pulumi:pulumi:StackReference":
            return args.name, {"name": args.inputs["name"], "outputs": self.outputs, "secretOutputNames": ["kubeconfig"]}
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}, []


def main(program: Path, stack: str, outputs_file: Path) -> int:
    project = yaml.safe_load((program / "Pulumi.yaml").read_text())["name"]
    mocks = PlatformStackMocks(json.loads(outputs_file.read_text()))
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=False)

    @pulumi.runtime.test
    def run_program() -> None:  # as the Pulumi CLI runs a program folder: its __main__.py
        runpy.run_path(str(program), run_name="__main__")

    try:
        run_program()
    except pulumi.RunError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    imported = sys.modules["trainium_eks"].__file__  # where the program's trainium_eks came from
    print(json.dumps({"trainium_eks": imported, "resources": mocks.registered}))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]).resolve(), sys.argv[2], Path(sys.argv[3])))
