"""The stack policies on small hand-built graphs: a Trainium node group with its launch template, placement group
and security groups, and the plugins, queues, FSx, roles, images, deploy runner and repair around it; each rule
passes the sound graph and catches each change. Props use the engine's wire names, numbers as floats.
"""

from __future__ import annotations

import json

import pytest
from rule_graphs import expect, node

from plan_graph.graph import UNKNOWN, Graph, Node
from plan_graph.trainium_groups import LAUNCH_TEMPLATE, NODE_GROUP, PLACEMENT_GROUP, SECURITY_GROUP, SUBNET
from policies.rules import cost, deploy_path, iam, images, repair, scheduling, security, topology, trainium_nodes
from trainium_eks import tokens

EKS, VPC_RULE = security.EKS_COMPONENT, security.VPC_INGRESS_RULE
VPC_EGRESS_RULE = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
TAINT = {"key": "aws.amazon.com/neuron", "value": "true", "effect": "NO_SCHEDULE"}
TOLERATION = {"key": "aws.amazon.com/neuron", "operator": "Exists", "effect": "NoSchedule"}

SELF_ALL = {"protocol": "-1", "fromPort": 0.0, "toPort": 0.0, "self": True}


def trainium_stack() -> dict[str, Node]:
    """A trn1.32xlarge node group in one subnet, its launch template (the catalog's EFA layout) and placement group."""
    subnet = node(SUBNET, {"availabilityZoneId": "use1-az6"}, "trainium")
    efa = node(SECURITY_GROUP, {"ingress": [SELF_ALL], "egress": [SELF_ALL]}, "efa")
    placement = node(PLACEMENT_GROUP, {"strategy": "cluster"}, "pg")
    interfaces = [
        {"interfaceType": kind, "networkCardIndex": float(card), "deviceIndex": float(device)}
        for card, device, kind in [(0, 0, "interface"), (0, 1, "efa-only"), *((c, 0, "efa-only") for c in range(1, 8))]
    ]
    template_props = {"networkInterfaces": interfaces, "placement": {"groupName": "pg"}}
    template = node(LAUNCH_TEMPLATE, template_props, "lt", networkInterfaces=[efa], placement=[placement])
    props = {"instanceTypes": ["trn1.32xlarge"], "amiType": "AL2023_x86_64_NEURON", "subnetIds": ["subnet-1"], "taints": [TAINT]}
    props["scalingConfig"] = {"desiredSize": 2.0, "maxSize": 2.0}
    group = node(NODE_GROUP, props, "ng", subnetIds=[subnet], launchTemplate=[template])
    return {"subnet": subnet, "efa": efa, "placement": placement, "template": template, "group": group}


def test_efa_self_traffic_needs_all_protocols_both_ways():
    stack = trainium_stack()
    efa = stack["efa"]
    expect(topology.efa_security_group_self_traffic(Graph(stack.values()), {}))
    efa.props["egress"] = [{"protocol": "tcp", "fromPort": 0.0, "toPort": 65535.0, "self": True}]
    expect(topology.efa_security_group_self_traffic(Graph(stack.values()), {}), "none of its interfaces' security groups")
    efa.props["egress"] = [{"protocol": "ALL", "fromPort": 0.0, "toPort": 0.0, "self": True}]
    expect(topology.efa_security_group_self_traffic(Graph(stack.values()), {}))
    efa.props["egress"] = UNKNOWN
    expect(topology.efa_security_group_self_traffic(Graph(stack.values()), {}))
    efa.props["egress"] = []
    separate = node(VPC_EGRESS_RULE, {"ipProtocol": "-1"}, securityGroupId=[efa], referencedSecurityGroupId=[efa])
    expect(topology.efa_security_group_self_traffic(Graph([*stack.values(), separate]), {}))


def lustre(*rules: dict) -> Graph:
    """A file system whose group has separate ingress rules, each from the group itself or (source "nodes") the nodes."""
    nodes_group, group = node(SECURITY_GROUP, name="nodes"), node(SECURITY_GROUP, name="lustre")
    links = {"self": [group], "nodes": [nodes_group]}
    separate = [node(VPC_RULE, r, securityGroupId=[group], referencedSecurityGroupId=links[r["source"]]) for r in rules]
    return Graph([node(topology.FSX, securityGroupIds=[group]), group, nodes_group, *separate])


def tcp(low, high, source: str = "self", protocol: str = "tcp") -> dict:
    return {"ipProtocol": protocol, "fromPort": low, "toPort": high, "source": source}


LUSTRE_CASES = {
    "exact": ([tcp(988.0, 988.0), tcp(988.0, 988.0, "nodes"), tcp(1018.0, 1023.0), tcp(1018.0, 1023.0, "nodes")], ()),
    "wider": ([tcp(0.0, 65535.0), tcp(900.0, 1100.0, "nodes", protocol="6")], ()),
    "all-protocols": ([tcp(None, None, protocol="-1"), tcp(None, None, "nodes", protocol="all")], ()),
    "client-ports-closed": ([tcp(988.0, 988.0), tcp(988.0, 988.0, "nodes")], ("TCP 1018-1023 between", "TCP 1018-1023 from")),
    "a-port-short": ([tcp(0.0, 65535.0), tcp(988.0, 1022.0, "nodes")], ("TCP 1018-1023 from the nodes",)),
    "udp": ([tcp(0.0, 65535.0, protocol="udp"), tcp(0.0, 65535.0, "nodes")], ("TCP 988 between", "TCP 1018-1023 between")),
    "reversed": ([tcp(1023.0, 988.0), tcp(0.0, 65535.0, "nodes")], ("TCP 988 between", "TCP 1018-1023 between")),
    "unknown-port": ([tcp(UNKNOWN, 1023.0)], ()),
}


@pytest.mark.parametrize(("rules", "fragments"), LUSTRE_CASES.values(), ids=LUSTRE_CASES)
def test_lustre_ports_by_range(rules, fragments):
    expect(topology.fsx_lustre_ports(lustre(*rules), {}), *fragments)


def test_lustre_ports_from_inline_rules_and_cidrs():
    from_vpc = {"protocol": "tcp", "fromPort": 0.0, "toPort": 65535.0, "cidrBlocks": ["10.0.0.0/16"]}
    group = node(SECURITY_GROUP, {"ingress": [SELF_ALL, from_vpc]})
    fsx = node(topology.FSX, securityGroupIds=[group])
    expect(topology.fsx_lustre_ports(Graph([fsx, group]), {}))
    group.props["ingress"] = [SELF_ALL, UNKNOWN]
    expect(topology.fsx_lustre_ports(Graph([fsx, group]), {}))


def test_topology_rules_pass_a_sound_stack_and_catch_each_change():
    stack = trainium_stack()
    graph, fsx = Graph(stack.values()), node(topology.FSX, subnetIds=[node(SUBNET, {"availabilityZoneId": "use1-az4"})])
    expect(topology.node_group_single_az(graph, {}))
    stack["group"].props["subnetIds"].append("subnet-2")
    expect(topology.node_group_single_az(graph, {}), "spans 2 subnets")
    expect(
        topology.fsx_in_trainium_az(Graph([*stack.values(), fsx]), {}), "is in use1-az4 but the Trainium nodes are in use1-az6"
    )
    expect(topology.az_offers_instance_type(graph, {}))
    stack["subnet"].props["availabilityZoneId"] = "use1-az1"
    expect(topology.az_offers_instance_type(graph, {}), "use1-az1 (us-east-1) does not offer trn1.32xlarge")
    expect(topology.efa_interface_per_network_card(graph, {}))
    del stack["template"].props["networkInterfaces"][0]["interfaceType"]  # EC2's default type is the ENA interface
    expect(topology.efa_interface_per_network_card(graph, {}))
    stack["template"].props["networkInterfaces"][0]["interfaceType"] = "interface"
    stack["template"].props["networkInterfaces"].append(dict(stack["template"].props["networkInterfaces"][8]))
    expect(topology.efa_interface_per_network_card(graph, {}), "two interfaces at network card 7 device index 0")
    stack["template"].props["networkInterfaces"].pop()
    card_7 = stack["template"].props["networkInterfaces"][8]
    card_7["interfaceType"] = "efa"  # EFA with ENA: one private IP more, against the catalog's layout
    expect(topology.efa_interface_per_network_card(graph, {}), "'efa' at network card 7 device index 0 where")
    card_7.update(interfaceType="efa-only", deviceIndex=1.0)
    moved = "no interface at network card 7 device index 0 where"
    expect(topology.efa_interface_per_network_card(graph, {}), moved)  # one finding for the template
    assert "'efa-only' at network card 7 device index 1 where" in next(topology.efa_interface_per_network_card(graph, {})).message
    stack["template"].props["networkInterfaces"][0]["interfaceType"] = "efa-only"  # EC2 refuses an EFA-only primary
    expect(topology.efa_interface_per_network_card(graph, {}), "'efa-only' at network card 0 device index 0")
    card_7["networkCardIndex"] = UNKNOWN
    expect(topology.efa_interface_per_network_card(graph, {}))
    expect(topology.cluster_placement_group(graph, {}))
    stack["placement"].props["strategy"] = "spread"
    expect(topology.cluster_placement_group(graph, {}), "strategy 'spread'")
    stack["placement"].props["strategy"] = UNKNOWN
    expect(topology.cluster_placement_group(graph, {}))
    expect(trainium_nodes.neuron_ami(graph, {}))
    stack["group"].props["amiType"] = "AL2023_x86_64_STANDARD"
    expect(trainium_nodes.neuron_ami(graph, {}), "AL2023_x86_64_NEURON")
    expect(topology.capacity_reservation_in_trainium_az(graph, {}))
    stack["template"].props["capacityReservationSpecification"] = {"capacityReservationTarget": {"id": "cr-1"}}
    expect(topology.capacity_reservation_in_trainium_az(graph, {}), f"without the {topology.RESERVATION_AZ_TAG} tag")
    stack["template"].props["tags"] = {topology.RESERVATION_AZ_TAG: UNKNOWN}
    expect(topology.capacity_reservation_in_trainium_az(graph, {}))


def test_plugins_queues_and_cost_on_a_small_stack():
    stack = trainium_stack()
    neuron = node(
        security.HELM_RELEASE, {"chart": "neuron-helm-chart", "values": {"devicePlugin": {"tolerations": [TOLERATION]}}}
    )
    efa = node(security.HELM_RELEASE, {"chart": "aws-efa-k8s-device-plugin", "values": {"tolerations": []}})
    queue = node(scheduling.QUEUE, {"spec": {"capability": {"aws.amazon.com/neuron": 32.0}}})
    graph = Graph([*stack.values(), neuron, efa, queue])
    expect(topology.device_plugins_present(graph, {}), "does not tolerate the Trainium taint")
    efa.props["values"]["tolerations"] = UNKNOWN
    expect(topology.device_plugins_present(graph, {}))
    expect(scheduling.volcano_queue_within_capacity(graph, {}))
    queue.props["spec"]["capability"]["aws.amazon.com/neuron"] = 33.0
    expect(scheduling.volcano_queue_within_capacity(graph, {}), "allows 33 aws.amazon.com/neuron")
    expect(scheduling.volcano_queue_within_capacity(Graph(stack.values()), {}), "no Volcano Queue")
    expect(cost.trainium_node_limit(graph, {"maxTrainiumNodes": 1}), "grow to 2 nodes")
    expect(cost.monthly_cost_budget(graph, {"maxMonthlyUsd": 1.0}), "above this stack's budget")
    stack["group"].props["scalingConfig"]["maxSize"] = UNKNOWN
    expect(cost.trainium_node_limit(graph, {"maxTrainiumNodes": 1}))


def test_irsa_and_protection_rules():
    irsa = json.dumps({"Statement": [{"Effect": "Allow", "Action": "sts:AssumeRoleWithWebIdentity"}]})
    role = node(iam.IAM_ROLE, {"assumeRolePolicy": irsa, "managedPolicyArns": ["arn:aws:iam::aws:policy/XFullAccess"]})
    attachment = node(iam.ROLE_POLICY_ATTACHMENT, {"policyArn": "arn:aws:iam::aws:policy/YFullAccess"}, role=[role])
    expect(iam.irsa_no_full_access(Graph([role, attachment]), {}), "YFullAccess", "XFullAccess")
    role.props["assumeRolePolicy"] = UNKNOWN
    expect(iam.irsa_no_full_access(Graph([role, attachment]), {}))
    fsx = node(security.FSX)
    expect(security.stateful_resources_protected(Graph([fsx]), {"requireProtection": True}), "not protected")
    expect(security.stateful_resources_protected(Graph([fsx]), {}))


def test_default_tags_fill_only_what_is_missing():
    target = node(SECURITY_GROUP, {"tags": {"owner": "me"}})
    config = {"defaultTags": {"owner": "them", "environment": "dev"}}
    assert cost.add_default_tags(target, config) == {"tags": {"owner": "me", "environment": "dev"}}


def test_eks_images_come_from_the_stack_region():
    efa = node(security.HELM_RELEASE, {"chart": "aws-efa-k8s-device-plugin", "values": {}}, "efa")
    other = node(security.HELM_RELEASE, {"chart": "volcano", "values": {}}, "volcano")
    expect(images.eks_images_from_stack_region(Graph([efa, other]), {}), "default image repository")
    efa.props["values"]["image"] = {"repository": "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin"}
    other.props["values"]["image"] = {"repository": "602401143452.dkr.ecr.us-east-2.amazonaws.com/eks/other"}
    expect(images.eks_images_from_stack_region(Graph([efa, other]), {}), "from us-west-2", "from us-east-2")
    efa.props["values"]["image"]["repository"] = "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/aws-efa-k8s-device-plugin"
    other.props["values"]["image"]["repository"] = UNKNOWN
    expect(images.eks_images_from_stack_region(Graph([efa, other]), {}))
    other.props["values"]["image"]["repository"] = "public.ecr.aws/neuron/x:1"  # public ECR is global
    expect(images.eks_images_from_stack_region(Graph([efa, other]), {}))
    other.provider_props = {"region": "us-west-2"}  # two regions: the stack's region is not known, nothing is judged
    efa.props["values"] = {}
    expect(images.eks_images_from_stack_region(Graph([efa, other]), {}))


def test_a_private_cluster_in_an_adopted_vpc_is_matched_to_its_runner_by_vpc_id():
    """No VPC resource to link through: the runner counts when its vpcConfig names the cluster's VPC ID."""
    cluster = node(EKS, {"endpointPublicAccess": False, "vpcId": "vpc-0a1b2c3d"}, "eks")
    runner_group = node(SECURITY_GROUP, {}, "runner")
    elsewhere = node(deploy_path.CODEBUILD_PROJECT, {"vpcConfig": {"vpcId": "vpc-99999999"}}, "other")
    expect(deploy_path.private_endpoint_has_in_vpc_runner(Graph([cluster, elsewhere]), {}), "no CodeBuild runner in its VPC")
    runner = node(deploy_path.CODEBUILD_PROJECT, {"vpcConfig": {"vpcId": "vpc-0a1b2c3d"}}, "runner", vpcConfig=[runner_group])
    expect(deploy_path.private_endpoint_has_in_vpc_runner(Graph([cluster, runner]), {}), "does not admit its runner")
    rule = node(
        VPC_RULE,
        {"ipProtocol": "tcp", "fromPort": 443.0, "toPort": 443.0},
        "api",
        securityGroupId=[cluster],
        referencedSecurityGroupId=[runner_group],
    )
    expect(deploy_path.private_endpoint_has_in_vpc_runner(Graph([cluster, runner, rule]), {}))
    expect(deploy_path.private_endpoint_has_in_vpc_runner(Graph([cluster]), {"requireInVpcRunner": False}))
    public = node(EKS, {"endpointPublicAccess": True}, "public")
    expect(deploy_path.private_endpoint_has_in_vpc_runner(Graph([public]), {}))


def test_node_auto_repair_where_required_and_the_agent_it_needs():
    stack = trainium_stack()
    graph, group, required = Graph(stack.values()), stack["group"], {"requireNodeRepair": True}
    expect(repair.trainium_node_auto_repair(graph, required), "has no node auto repair")
    expect(repair.trainium_node_auto_repair(graph, {}))  # not required, and nothing repairs without an agent
    group.props["nodeRepairConfig"] = {"enabled": UNKNOWN}
    expect(repair.trainium_node_auto_repair(graph, required))  # a preview that does not know yet
    group.props["nodeRepairConfig"] = {"enabled": True, "maxParallelNodesRepairedCount": 1.0}
    expect(repair.trainium_node_auto_repair(graph, required), "no eks-node-monitoring-agent add-on")
    cni = node(tokens.EKS_ADDON, {"addonName": "vpc-cni"}, "cni")
    expect(repair.trainium_node_auto_repair(Graph([*stack.values(), cni]), {}), "sees only the kubelet's Ready")
    agent = node(tokens.EKS_ADDON, {"addonName": "eks-node-monitoring-agent"}, "agent")
    expect(repair.trainium_node_auto_repair(Graph([*stack.values(), cni, agent]), required))
