# syntax=docker/dockerfile:1
# The manager image, for machines with Docker (BuildKit):
#
#	docker buildx build --platform linux/amd64,linux/arm64 \
#		--build-arg VERSION=$(git describe --tags --always --dirty) --build-arg REVISION=$(git rev-parse HEAD) \
#		--build-arg SOURCE_DATE_EPOCH=$(git log -1 --format=%ct) -t cos-externalizer:dev .
#
# It is the image `make image` and `make release` build without Docker (hack/tools/image): FROM
# scratch, the same static binary built with the same flags, and the same files written by the same
# code (`image rootfs`: /manager, /etc/passwd, /etc/group, /home/nonroot, /tmp, with their modes and
# owners, which COPY --from keeps), the same entrypoint, user, working dir, PATH and labels. No CA
# certificates and no tzdata: the manager talks only to the API server, with the cluster's CA from its
# ServiceAccount. Docker writes its own manifest and layer, so the digests differ from make release's.

FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=dev
ARG SOURCE_DATE_EPOCH=0
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY hack/tools/image/go.mod hack/tools/image/go.sum hack/tools/image/
RUN cd hack/tools/image && go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -buildvcs=false \
	-ldflags "-s -w -X github.com/cos-externalizer/cos-externalizer/cmd/cos-externalizer/app.Version=$VERSION" \
	-o /out/manager ./cmd/cos-externalizer
RUN cd hack/tools/image && SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH go run . rootfs -binary /out/manager -output /rootfs

FROM scratch
ARG VERSION=dev
ARG REVISION=
# org.opencontainers.image.created: SOURCE_DATE_EPOCH as RFC 3339 (date -u -d @$SOURCE_DATE_EPOCH +%FT%TZ).
ARG CREATED=1970-01-01T00:00:00Z
COPY --from=builder /rootfs/ /
LABEL org.opencontainers.image.created="$CREATED" \
	org.opencontainers.image.description="Externalizes ClusterObjectSets' inline objects into object-data Secrets and rolls them out" \
	org.opencontainers.image.licenses="Apache-2.0" \
	org.opencontainers.image.revision="$REVISION" \
	org.opencontainers.image.source="https://github.com/cos-externalizer/cos-externalizer" \
	org.opencontainers.image.title="cos-externalizer" \
	org.opencontainers.image.version="$VERSION"
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
WORKDIR /
USER 65532:65532
ENTRYPOINT ["/manager"]
