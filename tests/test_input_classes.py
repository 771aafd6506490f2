"""Each class of bad input found by adversarial inputs (issue 28), generated, wherever it can enter.

- Names: a pattern that takes a trailing newline or non-ASCII letters and digits. Every naming rule is a whole-string
  ASCII pattern (``trainium_eks.names``); a stack file and stack outputs with such a name are refused in one line.
- Quantities: Kubernetes quantities (``"1280000m"``, ``"1k"``, ``"1Ki"``, ``"1e3"``) read as apimachinery reads them.
- Wrong types: a policy rule given a string where an object belongs, a list where a string belongs, a quantity where
  a number belongs, judges the value instead of raising.

Examples are derandomized: CI sees the same inputs every run.
"""

from __future__ import annotations

import copy
import functools
import importlib
import inspect
import json
import pkgutil
from fractions import Fraction

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import FIXTURE_STACKS, cached_plan, evaluate, one_group

import policies.rules
from plan_graph.graph import UNKNOWN, Graph
from policies.rules import teams
from preflight import cli
from trainium_eks import layout, names, tokens
from trainium_eks.contract import ContractError, PlatformContract
from trainium_eks.quantities import SUFFIXES, quantity

GENERATED = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
# What Python's `$`, \d and \w take and no AWS or Kubernetes name allows.
NOT_ASCII = ["\n", "٣", "é", "ı", "\u00a0", "Ａ"]
PATTERNS = {name: pattern for name, pattern in vars(names).items() if hasattr(pattern, "fullmatch") and name == name.upper()}


def spoiled(draw, value: str) -> str:
    """``value`` with a trailing newline, or one character replaced by a non-ASCII letter, digit or space."""
    bad = draw(st.sampled_from(NOT_ASCII))
    if bad == "\n":
        return value + bad
    at = draw(st.integers(0, len(value) - 1))
    return value[:at] + bad + value[at + 1 :]


@GENERATED
@given(data=st.data(), name=st.sampled_from(sorted(PATTERNS)))
def test_name_patterns_take_the_whole_string_in_ascii(data, name):
    pattern = PATTERNS[name]
    value = data.draw(st.from_regex(pattern, fullmatch=True).filter(bool))
    assert pattern.match(value) and pattern.fullmatch(value)
    bad = spoiled(data.draw, value)
    assert not pattern.match(bad), (name, bad)


# The fixture staging stack (tests/fixture_stacks): one Trainium group, as the cases below know, whatever stacks/ holds.
STAGING = yaml.safe_load((FIXTURE_STACKS / "Pulumi.staging.yaml").read_text())
ROLE = "arn:aws:iam::111122223333:role/researchers"


def _with_team(config: dict, name: str, principal: str) -> None:
    config["trainium-eks:teams"] = [{"name": name, "neuronShare": 0.5, "principalArns": [principal]}]


def _with_reservation(config: dict, reservation_id: str) -> None:
    (group,) = config["trainium-eks:trainiumNodeGroups"][:1]
    group["capacityReservation"] = {"type": "odcr", "id": reservation_id, "azId": config["trainium-eks:trainiumAzId"]}


# key -> (a valid value, how the stack file takes it, the words of the key in the error line)
STACK_NAMES = {
    "team name": ("nlp", lambda config, value: _with_team(config, value, ROLE), "teams"),
    "principal ARN": (ROLE, lambda config, value: _with_team(config, "nlp", value), "principalArns"),
    "reservation ID": ("cr-0123456789abcdef0", _with_reservation, "capacityReservation"),
    "SNS topic ARN": (
        "arn:aws:sns:us-east-1:111122223333:alerts",
        lambda config, value: config.update({"trainium-eks:alarmTopicArn": value}),
        "alarmTopicArn",
    ),
}


@GENERATED
@given(data=st.data(), key=st.sampled_from(sorted(STACK_NAMES)))
def test_a_spoiled_name_in_a_stack_file_is_refused_in_one_line(tmp_path_factory, capsys, data, key):
    valid, place, words = STACK_NAMES[key]
    document = copy.deepcopy(STAGING)
    place(document["config"], spoiled(data.draw, valid))
    path = tmp_path_factory.mktemp("stack") / "Pulumi.staging.yaml"
    path.write_text(yaml.safe_dump(document, allow_unicode=True))
    capsys.readouterr()
    status = cli.main(["plan", "staging", "--stack-file", str(path), "--json"])
    err = capsys.readouterr().err
    assert status == 2 and len(err.strip().splitlines()) == 1 and words in err, err


@functools.cache
def staging_outputs() -> str:
    return json.dumps(cached_plan("staging", False, fixture=True).to_json()["outputs"])


TEAM = {
    "name": "nlp",
    "namespace": "team-nlp",
    "queue": "team-nlp",
    "weight": 1,
    "quota": {},
    "claimName": "fsx-claim",
    "fileSystemPath": "/teams/nlp",
    "principalArns": [ROLE],
}
# output -> where its name sits in the outputs
OUTPUT_NAMES = {
    "team name": ("teams", 0, "name"),
    "team namespace": ("teams", 0, "namespace"),
    "team queue": ("teams", 0, "queue"),
    "team claim": ("teams", 0, "claimName"),
    "team principal": ("teams", 0, "principalArns", 0),
    "job namespace": ("jobNamespace",),
    "claim": ("fsxClaimName",),
    "queue": ("volcanoQueues", 0, "name"),
    "node group": ("trainiumNodeGroups", 0, "name"),
}


@GENERATED
@given(data=st.data(), output=st.sampled_from(sorted(OUTPUT_NAMES)))
def test_a_spoiled_name_in_stack_outputs_is_refused_by_the_contract(data, output):
    outputs = json.loads(staging_outputs())
    outputs["teams"] = [copy.deepcopy(TEAM)]
    PlatformContract.from_outputs(outputs)  # valid as they are
    *path, last = OUTPUT_NAMES[output]
    place = functools.reduce(lambda value, step: value[step], path, outputs)
    place[last] = spoiled(data.draw, place[last])
    with pytest.raises(ContractError) as refused:
        PlatformContract.from_outputs(outputs)
    assert str(refused.value).startswith(".".join(map(str, OUTPUT_NAMES[output]))), refused.value


# ---- quantities


@GENERATED
@given(
    sign=st.sampled_from(["", "+", "-"]),
    whole=st.integers(0, 10**6),
    fraction=st.none() | st.from_regex(r"[0-9]{0,3}", fullmatch=True),
    suffix=st.sampled_from(["", *SUFFIXES]) | st.integers(-6, 6).map(lambda e: f"e{e}"),
    space=st.sampled_from(["", " ", "\t"]),
)
def test_quantities_read_as_kubernetes_reads_them(sign, whole, fraction, suffix, space):
    text = f"{space}{sign}{whole}{'' if fraction is None else '.' + fraction}{suffix}{space}"
    number = Fraction(f"{whole}.{fraction or 0}") * (-1 if sign == "-" else 1)
    scale = Fraction(10) ** int(suffix[1:]) if suffix.startswith("e") else SUFFIXES.get(suffix, 1)
    assert quantity(text) == number * scale, text


@pytest.mark.parametrize(
    "text", ["", "k", "1e", "1e3k", "1Kib", "1 k", "1.2.3", "1kk", "0x10", "١", "inf", "NaN", "1e3.5", "--1"]
)
def test_what_kubernetes_refuses_is_no_quantity(text):
    assert quantity(text) is None


def test_the_quantities_of_the_issue():
    assert (quantity("1280000m"), quantity("1k"), quantity("1Ki"), quantity(2.0)) == (1280, 1000, 1024, 2)
    assert quantity(True) is None and quantity(float("inf")) is None and quantity([1]) is None


# ---- wrong types in a plan, read by every policy rule


# The rules of policies/rules, each called as the packs call it: a stack rule with the graph, a resource rule with
# every resource (a rule must not raise even on a type it does not judge).
def _rules():
    found = []
    for module_info in pkgutil.iter_modules(policies.rules.__path__):
        module = importlib.import_module(f"policies.rules.{module_info.name}")
        for name, function in inspect.getmembers(module, inspect.isfunction):
            parameters = list(inspect.signature(function).parameters)
            if (
                not name.startswith("_")
                and function.__module__ == module.__name__
                and parameters[:2] in (["graph", "config"], ["node", "config"])
            ):
                found.append((f"{module_info.name}.{name}", function, parameters[0] == "graph"))
    return found


RULES = _rules()
WRONG_VALUES = st.sampled_from(
    ["x", "1k", "1280000m", "true", "", [], {}, ["x"], [["x"]], [{}], {"a": "b"}, None, 1.5, -1.0, True, UNKNOWN, 1e300]
)
# Two teams, so that the team rules have workspaces, quotas and bindings to read.
TEAMS = [
    {"name": "alpha", "neuronShare": 0.5, "principalArns": [ROLE]},
    {"name": "beta", "neuronShare": 0.5, "principalArns": ["arn:aws:iam::111122223333:role/beta"]},
]
PLANS = {
    "elastic": ("staging", one_group("trn1.32xlarge") | {"teams": TEAMS}),
    # 4 nodes at most: a quarter of the group, prod's experiments queue, is one whole node.
    "managed": ("prod", one_group("trn1n.32xlarge", provisioning="managed", minSize=2, desiredSize=2, maxSize=4)),
}


@functools.cache
def fixture_plan(kind: str) -> str:
    stack, overrides = PLANS[kind]
    return json.dumps(evaluate(stack, fixture=True, **overrides).to_json()["resources"])


def _places(value, path=()):
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _places(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:4]):
            yield from _places(item, (*path, index))


@GENERATED
@given(data=st.data(), kind=st.sampled_from(sorted(PLANS)), edits=st.integers(1, 12))
def test_rules_judge_values_of_the_wrong_type_instead_of_raising(data, kind, edits):
    records = json.loads(fixture_plan(kind))
    for _ in range(edits):
        record = data.draw(st.sampled_from(records))
        path = data.draw(st.sampled_from([p for p in _places(record["inputs"]) if p]), label="path") if record["inputs"] else None
        if path is None:
            continue
        *steps, last = path
        value = copy.deepcopy(data.draw(WRONG_VALUES))  # not the sample itself, which a later edit may reach into
        functools.reduce(lambda value, step: value[step], steps, record["inputs"])[last] = value
    graph = Graph.from_records(records)
    for name, rule, whole_graph in RULES:
        for target in [graph] if whole_graph else graph.nodes:
            try:
                found = rule(target, {})
                list(found) if inspect.isgenerator(found) else found  # a remediation returns the inputs it fixed
            except Exception as error:  # noqa: BLE001 (the failure names the rule and the value it could not read)
                pytest.fail(f"{name} raised {type(error).__name__}: {error}")


# The wrong types the issue found in the team rules, each in team alpha's resources: the rule names the value.
TEAM_WRONG_TYPES = {
    "subject name as a list": (tokens.K8S_ROLE_BINDING, "members", ("subjects", 0, "name"), ["trainium-eks:team-alpha"]),
    "principal as a list": (tokens.EKS_ACCESS_ENTRY, "member-0", ("principalArn",), [ROLE]),
    "groups as a string": (tokens.EKS_ACCESS_ENTRY, "member-0", ("kubernetesGroups",), "trainium-eks:team-alpha"),
    "groups as a number": (tokens.EKS_ACCESS_ENTRY, "member-0", ("kubernetesGroups",), 1.5),
    "claimRef as a string": (tokens.K8S_PERSISTENT_VOLUME, "fsx", ("spec", "claimRef"), "team-alpha/fsx-claim"),
}


@pytest.mark.parametrize("case", sorted(TEAM_WRONG_TYPES))
def test_a_team_value_of_the_wrong_type_is_a_violation(case):
    type_, name, path, value = TEAM_WRONG_TYPES[case]
    records = json.loads(fixture_plan("elastic"))
    (record,) = [r for r in records if r["type"] == type_ and r["name"].endswith(f"alpha-{name}")]
    *steps, last = path
    functools.reduce(lambda inputs, step: inputs[step], steps, record["inputs"])[last] = value
    graph = Graph.from_records(records)
    found = [*teams.team_access_namespaced(graph, {})]
    volumes = graph.of_type(tokens.K8S_PERSISTENT_VOLUME)  # the pack's resource type for this rule
    found += [v for node in volumes for v in teams.team_volume_own_directory(node, {})]
    assert [v.urn for v in found] == [record["urn"]], found
    assert repr(value) in found[0].message or str(value) in found[0].message, found[0].message


# ---- quantities in a plan: a team's quota


def _quota_rule(hard: object) -> list[str]:
    """The messages of team-quotas-within-capacity on the elastic fixture with team alpha's Neuron quota set to
    ``hard``."""
    records = json.loads(fixture_plan("elastic"))
    (quota,) = [r for r in records if r["type"] == tokens.K8S_RESOURCE_QUOTA and "alpha" in r["name"]]
    quota["inputs"]["spec"]["hard"][f"requests.{layout.NEURON_DEVICE_RESOURCE}"] = hard
    return [v.message for v in teams.team_quotas_within_capacity(Graph.from_records(records), {})]


def test_a_quota_of_1k_is_read_as_1000_devices():
    assert _quota_rule("1") == []  # one device fits what the node groups provide
    (message,) = _quota_rule("1k")
    assert "add up to" in message and "alpha 1000" in message, message


@pytest.mark.parametrize("hard", ["x", "1 k", "1e3k", [1], {"a": 1}, True])
def test_an_unreadable_quota_is_a_violation(hard):
    (message,) = _quota_rule(hard)
    assert "no Kubernetes quantity" in message and repr(hard) in message, message
