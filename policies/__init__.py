"""CrossGuard policy packs of trainium-eks.

``policies/rules/`` holds the rules as pure functions over the plain resource graph (``plan_graph.graph``);
``policies/packs.py`` turns them into pulumi_policy policies; each ``policies/<pack>/`` directory is a pack the
Pulumi CLI loads (``pulumi preview --policy-pack policies/<pack>``); ``policies/config/<stack>.json`` is the
per-stack ``--policy-pack-config``.
"""
