"""The plan graph and what is read from it, shared by policies/ and preflight/: the plain resource graph (``graph``)
that policies/ build from the policy SDK's resources and preflight/ from a plan, its Trainium groups of either kind
(``trainium_groups``), the cost estimate (``cost``), whether the system pods fit (``system_fit``), the deployment time
(``deployment``) and the time to a first training step (``first_step``)."""
