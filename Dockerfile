# The relay daemon's container image: a static binary on distroless, run as
# a non-root user (nonroot, uid 65532). Build and run (docs/operations.md,
# "Container"):
#
#   docker build --build-arg VERSION=$(git describe --always --dirty) \
#     --build-arg REVISION=$(git rev-parse HEAD) -t urbit-relay .
#   docker run -d --name relay -p 13337:13337/udp \
#     -v $PWD/relay-config:/etc/relay:ro urbit-relay
#
# The metrics listener is on the container's own 127.0.0.1:9337, so that
# neither -p nor --network host makes it public; the HEALTHCHECK reaches it
# there. To scrape it from the host, say so (docs/operations.md,
# "Container"): -p 127.0.0.1:9337:9337 and, after the image name,
# --config /etc/relay/relay.json --metrics 0.0.0.0:9337.
#
# Mount the config *directory*, not the file: an editor saves by writing a
# new file and renaming it over the old one, and a single-file bind mount
# keeps showing the old inode, so SIGHUP would re-read the old config.
#
# The base images are pinned by digest (the multi-arch index of each tag, as
# published on the dates below); a release build uses these defaults and
# pulls them. To move to a newer one, resolve the tag's digest again, e.g.
#   docker buildx imagetools inspect golang:1.26
#   crane digest gcr.io/distroless/static-debian12:nonroot
# and replace the sha256 here.
#
# TEST ONLY: cmd/relay/docker_test.go (TestDockerImage) builds this file
# unchanged where no image can be pulled, by passing --build-arg GO_IMAGE=
# and BASE_IMAGE= naming stand-ins it makes locally (relay-standin/...: the
# host's Go toolchain and module cache, offline; an /etc/passwd with
# nonroot). An image built from stand-ins is never a release image.
# golang:1.26 as of 2026-09-18 (Go 1.26.8).
ARG GO_IMAGE=golang:1.26@sha256:3c3e25a4da13fd0478eed2df1eb35a0e667094a7124d3993a6a1d30f71c17e79
# gcr.io/distroless/static-debian12:nonroot as of 2026-08-26.
ARG BASE_IMAGE=gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab

FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# REVISION (git rev-parse HEAD) is relay_build_info's revision: the build
# context has no .git, so Go records none itself.
ARG REVISION=
# cmd/relay/docker_test.go (TestDockerfileBuild) also runs this line with
# plain go build and checks the result is static; keep it a single RUN.
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" -o /out/relay ./cmd/relay

FROM ${BASE_IMAGE}
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="urbit-relay" \
      org.opencontainers.image.description="UDP relay for Urbit's network, in front of vere" \
      org.opencontainers.image.source="https://github.com/urbit-relay/relay" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /out/relay /relay
USER nonroot:nonroot
# 13337/udp: the relay's socket (the ship's public port; map it with -p).
# 9337/tcp: /metrics, /healthz and /readyz, on 127.0.0.1 unless --metrics
# says otherwise.
EXPOSE 13337/udp 9337/tcp
HEALTHCHECK --interval=30s --timeout=5s --start-period=5s --retries=3 \
  CMD ["/relay", "health", "--url", "http://127.0.0.1:9337/healthz"]
# Flags after the image name replace the CMD and override the config file.
ENTRYPOINT ["/relay", "run", "--listen", "0.0.0.0:13337", "--metrics", "127.0.0.1:9337"]
CMD ["--config", "/etc/relay/relay.json"]
