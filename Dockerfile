# syntax=docker/dockerfile:1
# The manager image, for machines with Docker:
#
#	docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t cos-externalizer:dev .
#
# `make image` builds the same image without Docker (hack/tools/image): the same static binary, built
# with the same flags, at /manager owned by 65532, with the same entrypoint, user, working dir and
# labels. Only the base differs: there an empty one with /etc/passwd, /etc/group, /home/nonroot and /tmp
# (what the manager uses of distroless), here distroless itself (also CA certificates and tzdata).

FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -buildvcs=false \
	-ldflags "-s -w -X github.com/cos-externalizer/cos-externalizer/cmd/cos-externalizer/app.Version=$VERSION" \
	-o /out/manager ./cmd/cos-externalizer

FROM gcr.io/distroless/static:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.source="https://github.com/cos-externalizer/cos-externalizer" \
	org.opencontainers.image.title="cos-externalizer" \
	org.opencontainers.image.version="$VERSION"
COPY --from=builder --chown=65532:65532 /out/manager /manager
WORKDIR /
USER 65532:65532
ENTRYPOINT ["/manager"]
