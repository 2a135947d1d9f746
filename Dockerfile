# syntax=docker/dockerfile:1
#
# consent-sidecar image: build with the full toolchain, run on distroless Node.js LTS as non-root.
#   docker build -t consent-sidecar:0.1.0 --build-arg VERSION=0.1.0 --build-arg REVISION=$(git rev-parse HEAD) .
# The runtime stage has no shell and no package manager; it runs with a read-only root file system
# (Node writes nothing to disk; logs go to stdout).

# Node 24 is the LTS line with the longest support left (Node 20 is end-of-life, 22 ends April 2027),
# and the line the whole suite runs on for the image (test/node-lines.json). Pin by digest in your
# registry mirror (e.g. with Renovate) for reproducible builds. Where no registry is reachable, both
# can be local images: npm run test:image builds stand-ins and this very file on them, then runs it.
ARG NODE_BUILD_IMAGE=node:24-bookworm-slim
ARG NODE_RUNTIME_IMAGE=gcr.io/distroless/nodejs24-debian12:nonroot

# Full install, TypeScript compile (tsc -> dist/) and the CLI's bundle (esbuild -> dist/bundle/,
# what the entrypoint runs: scripts/bundle.mjs). The bundle holds every production dependency a
# running sidecar loads (test/e2e/footprint-imports.test.ts), so the image carries no node_modules.
# No install script is run: the build is tsc and esbuild, and no production dependency needs one.
FROM ${NODE_BUILD_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
RUN npm run build
# What ships, as a CycloneDX SBOM (/app/sbom.cdx.json in the image), made from the lockfile: every
# production dependency and none of the development ones (cyclonedx-npm resolves the production tree
# as npm ls --omit=dev does; npm sbom --omit=dev drops production packages a development one shares).
RUN npm run -s sbom -- --output-file sbom.cdx.json

FROM ${NODE_RUNTIME_IMAGE} AS runtime
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
ARG SOURCE=https://github.com/consent-sidecar/consent-sidecar
ARG NODE_RUNTIME_IMAGE
LABEL org.opencontainers.image.title="consent-sidecar" \
      org.opencontainers.image.description="Fail-closed sidecar between an application and a remote consent service: cached authorization checks and verified webhooks on localhost." \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.base.name="${NODE_RUNTIME_IMAGE}"
ENV NODE_ENV=production
# A young generation of 1 MiB semi-spaces instead of V8's up to 8: idle RSS 77 -> 74 MiB, under
# load 102 -> 89 MiB (with Redis 170 -> 119 MiB), with no measurable loss of cache-hit throughput
# (docs/performance.md, Footprint). A NODE_OPTIONS of your own replaces it: keep the flag in it.
ENV NODE_OPTIONS=--max-semi-space-size=1
WORKDIR /app
# package.json is needed at run time: it declares "type": "module" for dist/*.js. What runs is the
# bundle: dist/cli.js and dist/bundle/ (esbuild's output, the dependencies inside). Nothing else of
# dist/ (tsc's modules, the client's types) is read in the image.
COPY package.json ./
COPY --from=build /app/sbom.cdx.json ./sbom.cdx.json
COPY --from=build /app/dist/cli.js ./dist/cli.js
COPY --from=build /app/dist/bundle ./dist/bundle
# The ext_authz .proto files the gRPC listener speaks (docs/ext-authz-grpc.md), for whoever wires a proxy.
COPY --from=build /app/dist/grpc/proto ./dist/grpc/proto
# 7700 decision API (bound to 127.0.0.1: reachable from the same pod only), 7701 webhook ingress,
# 7702 admin (/metrics, /healthz, /readyz).
EXPOSE 7700 7701 7702
# distroless "nonroot" user, numeric so Kubernetes can verify runAsNonRoot.
USER 65532:65532
# Exec form: node is PID 1 and receives SIGTERM directly (graceful drain). No shell in the image.
# V8's tiering as Node 20 had it (no Maglev mid-tier) and TurboFan after 10,000 calls instead of
# 3,000: no optimizing compiler runs before ready, so neither compiler's code is paged in at idle.
# Idle RSS 60.9 -> 58.7 MiB, with Redis 65.1 -> 62.8, with Redis and tracing 67.4 -> 65.2; cache-hit
# throughput unchanged (docs/performance.md, Footprint). V8 flags, refused in NODE_OPTIONS: here. A
# node whose V8 lacks one refuses to start ("bad option", exit 9): moving to another Node line, run
# npm run test:image and test/e2e/footprint-tiering.test.ts on it first (CI runs both on the pinned lines).
ENTRYPOINT ["/nodejs/bin/node", "--no-maglev", "--invocation-count-for-turbofan=10000", "/app/dist/cli.js"]
CMD ["serve"]
