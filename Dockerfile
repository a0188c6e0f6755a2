# syntax=docker/dockerfile:1
#
# One image, two programs: `gateway` (HTTP API) and `worker` (Kafka -> MySQL).
# Choose one with the command: `docker run IMAGE gateway` / `docker run IMAGE worker`
# (`worker migrate` applies the migrations and exits). docker-compose.yml runs both.
#
#   docker build -t seckill .

############################################################ builder
FROM rust:1.95-bookworm AS builder

# rdkafka builds a bundled librdkafka with gcc/make and links zlib; nothing here uses OpenSSL
# today, libssl-dev only keeps a future TLS feature from breaking the build.
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential pkg-config zlib1g-dev libssl-dev \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /src
# Migrations are embedded at compile time (sqlx::migrate!), so migrations/ must be in the
# context; .dockerignore keeps target/, .dev/ and .git/ out.
COPY . .

# No database at build time: sqlx macros use the checked-in query data, if any.
ENV SQLX_OFFLINE=true \
    CARGO_TERM_COLOR=never

# BuildKit cache mounts keep the registry and target/ between builds; the binaries are copied
# out of the cached target/ because a cache mount is not part of the image.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin gateway --bin worker \
    && mkdir -p /out \
    && cp target/release/gateway target/release/worker /out/

############################################################ runtime
FROM debian:bookworm-slim AS runtime

# ca-certificates for TLS to managed services, curl for the container healthchecks.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/*

RUN groupadd --system --gid 10001 seckill \
    && useradd --system --uid 10001 --gid seckill --home-dir /nonexistent --no-create-home \
       --shell /usr/sbin/nologin seckill

COPY --from=builder /out/gateway /out/worker /usr/local/bin/

# Secrets are set at run time, never here: both programs refuse to start without
# SECKILL_ADMIN_TOKEN (32 bytes or more), and the gateway also without SECKILL_ADMISSION_SECRET
# and a buyer-token key (SECKILL_AUTH_HS256_SECRET or SECKILL_AUTH_JWKS_FILE).
# Listen on every interface inside the container (the programs default to 127.0.0.1).
ENV SECKILL_HTTP_ADDR=0.0.0.0:8080 \
    SECKILL_WORKER_HTTP_ADDR=0.0.0.0:9090 \
    SECKILL_LOG_FORMAT=json

USER seckill:seckill
# 8080: gateway API (/livez, /healthz, ...). 9090: worker health and metrics.
EXPOSE 8080 9090

# No ENTRYPOINT: the command is the program, found on PATH (`gateway`, `worker`, `worker migrate`).
CMD ["gateway"]
