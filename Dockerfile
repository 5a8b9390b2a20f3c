# The relay daemon's container image: a static binary on distroless, run as
# a non-root user. Build and run (see docs/operations.md):
#
#   docker build --build-arg VERSION=$(git describe --always) -t urbit-relay .
#   docker run -d --name relay -p 13337:13337/udp -p 127.0.0.1:9337:9337 \
#     -v $PWD/relay.json:/etc/relay/relay.json:ro urbit-relay
#
# cmd/relay/docker_test.go runs this file's `go build` line with plain go
# build and checks the result is static; keep that line a single RUN.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/relay ./cmd/relay

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/relay /relay
USER nonroot:nonroot
# 13337/udp: the relay's socket (the ship's public port; map it with -p).
# 9337/tcp: /metrics, /healthz and /readyz.
EXPOSE 13337/udp 9337/tcp
HEALTHCHECK --interval=30s --timeout=5s --start-period=5s --retries=3 \
  CMD ["/relay", "health", "--url", "http://127.0.0.1:9337/healthz"]
# Flags after the image name replace the CMD and override the config file.
ENTRYPOINT ["/relay", "run", "--listen", "0.0.0.0:13337", "--metrics", "0.0.0.0:9337"]
CMD ["--config", "/etc/relay/relay.json"]
