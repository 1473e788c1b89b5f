# The container pool's image (infra/containers.py): the worker loop `jobsched worker --pool container`
# with the same code the Lambda asset has (infra/bundling.py): the runtime dependencies of
# requirements.txt, the jobsched and functions packages, and your own handlers/ package when it exists.
# It adds what the `jobsched` command needs (the CLI, its API client, jobsched.local's configuration)
# and leaves out the benchmarks, the deploy rehearsal and the test fakes (.dockerignore).
# Built for linux/arm64 (Fargate's Graviton tasks) by `cdk deploy`, or by your own pipeline
# (docker buildx build --platform linux/arm64 .) and deployed with -c container_image=<uri>.
# Python's minor version is Lambda's (infra/bundling.py LAMBDA_PYTHON_VERSION).
FROM public.ecr.aws/docker/library/python:3.14-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONPATH=/app

WORKDIR /app
COPY requirements.txt ./
RUN pip install --no-cache-dir --only-binary=:all: -r requirements.txt

# Everything .dockerignore lets in: jobsched/, functions/ and handlers/ (when present).
COPY . ./
RUN python -m compileall -q --invalidation-mode unchecked-hash /app \
    && printf '#!/bin/sh\nexec python -m jobsched.cli "$@"\n' > /usr/local/bin/jobsched \
    && chmod 0755 /usr/local/bin/jobsched \
    && useradd --system --uid 10001 --no-create-home jobsched

USER 10001
# A worker has no port to probe; ECS judges the task by its process (the loop exits on a fatal error).
HEALTHCHECK NONE
CMD ["jobsched", "worker", "--pool", "container"]
