# muster-scheduler on distroless, as a non-root user. For machines with a
# container engine:
#   docker build -t muster-scheduler:dev .
# Without one, `make image` builds the same layout (static binary at
# /usr/local/bin/muster-scheduler, user 65532) with hack/image.
ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS=linux
ARG TARGETARCH=amd64
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static: the base has no libc.
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w" -o /out/muster-scheduler ./cmd/muster-scheduler

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/muster-scheduler /usr/local/bin/muster-scheduler
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/muster-scheduler"]
