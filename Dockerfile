# The controller image: `karpenter run` as a non-root user, logging JSON lines to stdout.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    LOG_ENCODING=json

WORKDIR /src
COPY pyproject.toml README.md ./
COPY karpenter ./karpenter
RUN pip install . && rm -rf /src

# 65532 is the conventional "nonroot" uid (distroless); the chart's securityContext matches it
RUN groupadd --system --gid 65532 karpenter \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin karpenter
USER 65532:65532
WORKDIR /

EXPOSE 8080 8081
ENTRYPOINT ["karpenter"]
CMD ["run"]
