# Fairshoe service image: embedded SQLite and generated dev keys by default; mount /data to keep them.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 FAIRSHOE_DATA_DIR=/data
WORKDIR /app
# gcc builds the certified shuffle's C inner loop (rng_service/rng/_fisher_yates.c)
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml setup.py MANIFEST.in README.md ./
COPY build_support ./build_support
COPY proto ./proto
COPY game_math ./game_math
COPY rng_service ./rng_service
# the build generates the gRPC stubs (setup.py); grpcio-tools stays in the build environment
RUN python -m venv .venv && .venv/bin/pip install --no-cache-dir . \
    && useradd --system --home /data fairshoe && mkdir -p /data && chown fairshoe /data
USER fairshoe
VOLUME /data
EXPOSE 50051 9464
HEALTHCHECK CMD .venv/bin/python -c "import grpc; from grpc_health.v1 import health_pb2 as h, health_pb2_grpc as g; \
  print(g.HealthStub(grpc.insecure_channel('127.0.0.1:50051')).Check(h.HealthCheckRequest(), timeout=2).status)"
ENTRYPOINT [".venv/bin/fairshoe"]
CMD ["serve", "--address", "0.0.0.0:50051", "--metrics-address", "0.0.0.0", "--metrics-port", "9464"]
