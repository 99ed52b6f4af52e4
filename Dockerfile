# One image for every role of the binary: the chart runs it as `manager` and passes the same image
# as --member-agent-image, so manager and sidecar can never drift apart.
#
# Dockerfile.dockerignore keeps bin/ (hundreds of MB of test binaries), .git, tests and the chart
# out of the build context; COPY . . then takes whatever Go packages the binary imports.

# Base images are pinned by digest (the multi-arch index), so a rebuild takes exactly the bytes that
# were reviewed; the tag beside it is for readers. Bump tag and digest together, deliberately.
#
# The builder runs on the build host's platform and cross-compiles, which keeps multi-arch builds
# (docker buildx --platform linux/amd64,linux/arm64) fast: no emulated compiler.
FROM --platform=$BUILDPLATFORM golang:1.26@sha256:3aff6657219a4d9c14e27fb1d8976c49c29fddb70ba835014f477e1c70636647 AS builder
ARG TARGETOS=linux
ARG TARGETARCH
WORKDIR /src

# Dependencies first, so source edits reuse the cached module download layer.
COPY go.mod go.sum ./
RUN go mod download

COPY . .
# The commit, for `etcd-conductor version` and the revision label (.git is not in the context):
# docker build --build-arg REVISION=$(git rev-parse HEAD) --build-arg VERSION=<internal/version.Version>
ARG REVISION=""
ARG VERSION=""
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X github.com/etcd-conductor/etcd-conductor/internal/version.commit=$REVISION" \
    -o /etcd-conductor ./cmd/etcd-conductor

# Static binary: no libc, no shell, nothing to patch but the binary itself. The same contract as
# `make image` (tools/imagebuild, which builds FROM scratch without Docker; a test holds the two
# together): the binary at /etcd-conductor as the ENTRYPOINT (member pods and the chart set args
# only), user 65532:65532, the same labels.
FROM gcr.io/distroless/static:nonroot@sha256:e2e927ec666bae08560abb3c55d0659eceabb657f56b6782ab500a9fc7f555e3
ARG REVISION=""
ARG VERSION=""
LABEL org.opencontainers.image.title="etcd-conductor" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$REVISION" \
      org.opencontainers.image.source="https://github.com/etcd-conductor/etcd-conductor" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=builder /etcd-conductor /etcd-conductor
USER 65532:65532
ENTRYPOINT ["/etcd-conductor"]
