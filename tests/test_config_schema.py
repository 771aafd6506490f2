"""Pulumi.yaml's config block: generated from the model (`make docs`), typed and defaulted as the Pulumi CLI reads it."""

from __future__ import annotations

import re

import pytest
import yaml
from support import FIXTURE_STACKS, settings

from preflight import stackfile
from preflight.stackfile import REPO_ROOT
from trainium_eks.config import ConfigError, config_types, declarations, parse, schema_docs
from trainium_eks.config.stack import StackInput


def test_defaults_come_from_pulumi_yaml_once_applied_as_the_cli_does(tmp_path):
    _, declared = declarations()
    stack_file = FIXTURE_STACKS / "Pulumi.staging.yaml"
    document = yaml.safe_load(stack_file.read_text())
    assert "trainium-eks:etcdStorageGiB" not in document["config"] and "trainium-eks:jobNamespace" not in document["config"]
    cfg = parse(stackfile.load("staging", stack_file).config, stack="staging")
    assert cfg.scheduling.etcd_storage_gib == declared["etcdStorageGiB"]["default"]
    assert cfg.scheduling.job_namespace == declared["jobNamespace"]["default"]
    # The model applies none itself: a map without a declared key is missing that key.
    with pytest.raises(ConfigError, match="etcdStorageGiB: missing"):
        parse(settings("staging", fixture=True, etcdStorageGiB=None).config, stack="staging")


def test_the_default_queue_is_declared_in_pulumi_yaml_and_reaches_the_program():
    stack_file = FIXTURE_STACKS / "Pulumi.dev.yaml"
    assert "volcanoQueues" not in yaml.safe_load(stack_file.read_text())["config"]  # the fixture dev takes the default
    (queue,) = parse(stackfile.load("dev", stack_file).config, stack="dev").scheduling.queues
    (declared_queue,) = declarations()[1]["volcanoQueues"]["default"]
    assert (queue.name, queue.weight, queue.neuron_share) == (
        declared_queue["name"],
        declared_queue["weight"],
        declared_queue["neuronShare"],
    )


def test_the_lists_of_objects_are_typed_where_the_cli_checks_them():
    _, declared = declarations()
    for key in ("trainiumNodeGroups", "volcanoQueues"):
        assert declarations_type(declared[key]) == "array<object>"


def declarations_type(spec: dict) -> str:
    return config_types.Declaration.model_validate(spec).full_type_name


def test_yaml_1_1_booleans_stay_strings_as_the_cli_reads_them(tmp_path):
    text = (FIXTURE_STACKS / "Pulumi.staging.yaml").read_text() + "  trainium-eks:tensorboard: yes\n"
    stack_file = tmp_path / "Pulumi.staging.yaml"
    stack_file.write_text(text)
    with pytest.raises(stackfile.StackFileError, match="'trainium-eks:tensorboard' must be of type 'boolean'"):
        stackfile.load("staging", stack_file=stack_file)
    stack_file.write_text(text.replace("tensorboard: yes", "tensorboard: True"))
    assert stackfile.load("staging", stack_file=stack_file).config["trainium-eks:tensorboard"] == "true"


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ({"trainium-eks:trainiumNodeGroups": ["trn1-32xl"]}, "'trainium-eks:trainiumNodeGroups' must be of type 'array<object>'"),
        ({"trainium-eks:volcanoQueues": {"name": "q"}}, "'trainium-eks:volcanoQueues' must be of type 'array<object>'"),
        ({"trainium-eks:availabilityZoneCount": "two"}, "'trainium-eks:availabilityZoneCount' must be of type 'integer'"),
        ({"trainium-eks:tensorboard": "yes"}, "'trainium-eks:tensorboard' must be of type 'boolean'"),
        ({"trainium-eks:publicAccessCidrs": [24]}, "'trainium-eks:publicAccessCidrs' must be of type 'array<string>'"),
        ({"trainium-eks:vpcCidr": ["10.0.0.0/16"]}, "'trainium-eks:vpcCidr' must be of type 'string'"),
    ],
)
def test_stack_values_get_the_cli_type_check_before_the_program(tmp_path, value, words):
    document = yaml.safe_load((FIXTURE_STACKS / "Pulumi.staging.yaml").read_text())
    document["config"].update(value)
    stack_file = tmp_path / "Pulumi.staging.yaml"
    stack_file.write_text(yaml.safe_dump(document))
    with pytest.raises(stackfile.StackFileError) as raised:
        stackfile.load("staging", stack_file=stack_file)
    message = str(raised.value)
    assert message.startswith(f"{stack_file}: ") and words in message and len(message.splitlines()) == 1


# The CLI's ValidateConfigValue on what it decodes (YAML in Pulumi.yaml, strings or JSON from a stack file).
CLI_TYPE_RULES = [
    ("integer", None, 2, True),
    ("integer", None, 2.0, True),
    ("integer", None, 2.5, False),
    ("integer", None, "-3", True),
    ("integer", None, "2.0", False),
    ("integer", None, " 2", False),
    ("integer", None, True, False),
    ("boolean", None, "true", True),
    ("boolean", None, "True", False),
    ("boolean", None, False, True),
    ("string", None, 1, False),
    ("object", None, {}, True),
    ("object", None, [], False),
    ("array", config_types.ItemsType(type="object"), [{"a": 1}, {}], True),
    ("array", config_types.ItemsType(type="object"), [{"a": 1}, "b"], False),
    ("array", config_types.ItemsType(type="array", items=config_types.ItemsType(type="integer")), [[1, "2"]], True),
    ("array", None, [], False),
]


@pytest.mark.parametrize(("type_name", "items", "value", "accepted"), CLI_TYPE_RULES)
def test_type_checks_follow_the_cli(type_name, items, value, accepted):
    assert config_types.conforms(type_name, items, value) is accepted


def test_pulumi_yaml_and_the_configuration_guide_are_generated_from_the_model():
    for path, text in schema_docs.generated().items():
        assert path.read_text() == text, f"{path.relative_to(REPO_ROOT)} is stale: run `make docs` and commit the result"


def test_every_key_of_the_model_is_declared_and_listed_in_the_guide():
    _, declared = declarations()
    properties = StackInput.model_json_schema(by_alias=True)["properties"]
    assert set(declared) == set(properties)
    for key, prop in properties.items():
        assert f"| `{key}` |" in schema_docs.section(prop["section"]), key


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda text: text.replace("<!-- end of generated: storage -->", ""), "'storage' has no end marker"),
        (
            lambda text: re.sub(r"<!-- generated [^\n]*: storage -->.*: storage -->", "", text, flags=re.S),
            "no block for the section 'storage'",
        ),
        (lambda text: text.replace(": storage -->", ": strage -->"), "no model key is listed in 'strage'"),
    ],
)
def test_a_guide_whose_markers_do_not_match_the_model_is_refused_in_one_line(edit, words):
    guide = (REPO_ROOT / schema_docs.GUIDE).read_text()
    with pytest.raises(schema_docs.DocsError, match=words) as raised:
        schema_docs.configuration_md(edit(guide))
    assert "\n" not in str(raised.value)


def test_generated_tables_keep_the_prose_around_them():
    guide = (REPO_ROOT / schema_docs.GUIDE).read_text()
    emptied = re.sub(r"(model: (\S+) -->\n).*?(<!-- end of generated: \2 -->)", r"\1\3", guide, flags=re.S)
    assert emptied != guide and schema_docs.configuration_md(emptied) == schema_docs.configuration_md(guide)
