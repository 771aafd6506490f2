# Everything a developer or CI runs. Each target builds .venv from pinned requirements first (Python 3.11+).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The infrastructure set alone (requirements-infra.txt): what plan, check, diff and the pull-request report need
INFRA_STAMP := $(VENV)/.installed-infra
STACK  ?= dev
# checkov pins conflict with the project's (tabulate), so it gets a virtualenv of its own
CHECKOV_VENV  := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed
# Mermaid's own parser (npm), which tests/test_diff_markdown.py runs over the change report's graph
MERMAID_DIR   := tests/mermaid
MERMAID_STAMP := $(MERMAID_DIR)/node_modules/.installed

.PHONY: preview plan-json test lint docs bench image constraints clean

# Not echoed, and pip's notes go to stderr: `make plan-json > plan.json` writes the plan alone, even on a fresh clone.
$(INFRA_STAMP): requirements.txt requirements-infra.txt constraints.txt pyproject.toml
	@echo "building $(VENV) from the pinned infrastructure requirements" >&2
	@$(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-infra.txt -c constraints.txt >&2
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --editable . >&2
	@touch $@

# The full set on top: tests, linters, the training stack and the job tools.
$(STAMP): $(INFRA_STAMP) requirements-dev.txt
	@echo "adding the pinned development requirements to $(VENV)" >&2
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt -c constraints.txt >&2
	@touch $@

$(CHECKOV_STAMP): requirements-checkov.txt constraints-checkov.txt
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-checkov.txt -c constraints-checkov.txt
	touch $@

# npm ci installs exactly the locked versions (and empties node_modules first: the stamp comes after)
$(MERMAID_STAMP): $(MERMAID_DIR)/package.json $(MERMAID_DIR)/package-lock.json
	cd $(MERMAID_DIR) && npm ci --no-audit --no-fund
	touch $@

## preview: the resource tree of STACK (default dev), evaluated offline (the infrastructure set alone)
preview: $(INFRA_STAMP)
	$(BIN)/python -m preflight plan $(STACK)

## plan-json: the same as one JSON object (`make plan-json > plan.json` writes JSON only)
plan-json: $(INFRA_STAMP)
	@$(BIN)/python -m preflight plan $(STACK) --json

## test: lint, then the whole test suite (with checkov from .venv-checkov), in two processes: each test file runs whole
## in one, so a file's shared fixture (a real training run, a real etcd) is made once; files go out in collection
## order, the long ones (marker minutes: tests/conftest.py) first
test: lint $(CHECKOV_STAMP) $(MERMAID_STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder

## lint: ruff's checks and formatting, actionlint over the workflows
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/actionlint .github/workflows/*.yml

## docs: regenerate Pulumi.yaml's config block and docs/configuration.md's key tables from the stack's model
docs: $(STAMP)
	$(BIN)/python -m trainium_eks.config.schema_docs

# $(call pin,REQUIREMENTS,CONSTRAINTS,VENV): the pip freeze of a fresh virtualenv with REQUIREMENTS, into CONSTRAINTS
define pin
	rm -rf /tmp/trainium-eks-pin && $(PYTHON) -m venv /tmp/trainium-eks-pin
	/tmp/trainium-eks-pin/bin/pip install --quiet --disable-pip-version-check -r $(1)
	{ echo "# Full pin set for $(1) (pip freeze of a fresh $(3), Python 3.11). Regenerate with: make constraints"; \
	  /tmp/trainium-eks-pin/bin/pip freeze --disable-pip-version-check; } > $(2)
endef

## constraints: re-pin every transitive dependency after editing a requirements file
constraints:
	$(call pin,requirements-dev.txt,constraints.txt,.venv)
	$(call pin,requirements-checkov.txt,constraints-checkov.txt,.venv-checkov)

clean:
	rm -rf $(VENV) $(CHECKOV_VENV) $(MERMAID_DIR)/node_modules .pytest_cache .hypothesis

## bench: engine speed figures (check --all, large generated stacks, diff against HEAD and HEAD~1), the infrastructure
##        set's install from an empty pip cache and its size, and job recovery timings; with BENCH_MAKE_TEST=1 also
##        `make test` from a fresh clone (as long as the suite takes: README, "Engine speed")
bench: $(STAMP)
	$(BIN)/python -m benchmarks.bench_preflight
	$(BIN)/python -m benchmarks.bench_diff
	$(BIN)/python -m benchmarks.bench_install
	$(BIN)/python -m benchmarks.bench_recovery
	$(if $(BENCH_MAKE_TEST),$(BIN)/python -m benchmarks.bench_make_test)

## image: build and push every image to the stack's ECR repository: each training stack's and the data shell, tagged
##        as trainium_eks/versions.py says (`python -m trainium_eks.images` lists them; needs Docker and AWS credentials)
image: $(STAMP)
	set -e; \
	builds="$$($(BIN)/python -m trainium_eks.images)"; \
	repo="$$(pulumi stack output ecrRepositoryUrl --stack $(STACK))"; \
	region="$$(pulumi stack output region --stack $(STACK))"; \
	aws ecr get-login-password --region "$$region" | docker login --username AWS --password-stdin "$${repo%%/*}"; \
	echo "$$builds" | while read -r dockerfile target tag args; do \
	  set --; for arg in $$args; do set -- "$$@" --build-arg "$$arg"; done; \
	  docker build -f "$$dockerfile" --target "$$target" "$$@" -t "$$repo:$$tag" .; \
	  docker push "$$repo:$$tag"; \
	done
