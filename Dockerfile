# One image for every role of the binary: the chart runs it as `manager`, and the manager injects
# the same image as the member-agent sidecar, so the two can never drift apart.

# The builder runs on the build host's platform and cross-compiles, which keeps multi-arch builds
# (docker buildx --platform linux/amd64,linux/arm64) fast: no emulated compiler.
FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
ARG TARGETOS=linux
ARG TARGETARCH
WORKDIR /src

# Dependencies first, so source edits reuse the cached module download layer.
COPY go.mod go.sum ./
RUN go mod download

# Only what the binary is built from; test binaries and bin/ stay out of the image context copy.
COPY cmd/ cmd/
COPY internal/ internal/
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w" -o /etcd-conductor ./cmd/etcd-conductor

# Static binary: no libc, no shell, nothing to patch but the binary itself.
FROM gcr.io/distroless/static:nonroot
COPY --from=builder /etcd-conductor /etcd-conductor
USER 65532:65532
ENTRYPOINT ["/etcd-conductor"]
