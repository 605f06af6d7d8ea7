# The project's own image: `gpu-rollout` and nothing else, for the in-cluster guard (components/guard.py runs
# `gpu-rollout guard ...` in it). Built and pushed, with build provenance, by .github/workflows/guard-image.yml;
# stacks pin what it pushed by digest (guard.image). The base is pinned by digest too, so a rebuild of one commit
# installs onto the same bytes; move it deliberately (a pull request that changes this line).
FROM python:3.11-slim-bookworm@sha256:b18992999dbe963a45a8a4da40ac2b1975be1a776d939d098c647482bcad5cba AS build

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# What pip installs: the project's metadata, its pins and the packages pyproject.toml lists (tests/test_dockerfile.py).
COPY pyproject.toml constraints.txt README.md ./
COPY cloud_credentials cloud_credentials
COPY checks checks
COPY components components
COPY engine_contracts engine_contracts
COPY fleetspec fleetspec
COPY git_revisions git_revisions
COPY gpu_knowledge gpu_knowledge
COPY policy policy
COPY preview preview
COPY promotion_train promotion_train
COPY pulumi_backend pulumi_backend
COPY refusals refusals
COPY renderers renderers
COPY rollout rollout
COPY simulate simulate
COPY vocabulary vocabulary
COPY workload workload
# Every dependency at the version constraints.txt pins, into a virtual environment the runtime stage copies whole.
RUN python -m venv /opt/gpu-rollout \
    && /opt/gpu-rollout/bin/pip install --constraint constraints.txt . \
    && /opt/gpu-rollout/bin/gpu-rollout --help > /dev/null

FROM python:3.11-slim-bookworm@sha256:b18992999dbe963a45a8a4da40ac2b1975be1a776d939d098c647482bcad5cba

ENV PATH=/opt/gpu-rollout/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY --from=build /opt/gpu-rollout /opt/gpu-rollout
# Non-root, by number, so the pod's runAsNonRoot can tell (the Deployment runs as the same user and group).
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["gpu-rollout"]
CMD ["--help"]
