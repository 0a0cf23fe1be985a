# Multi-stage build: a static binary on a distroless base, run as non-root.
#   make docker   (or docker build --build-arg VERSION=$(git describe --tags --always) -t vllm-normalizer .)
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# make docker passes all four from git; .git is not in the build context.
ARG VERSION=dev
ARG REVISION=unknown
ARG BRANCH=unknown
ARG BUILD_DATE
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w \
        -X github.com/prometheus/common/version.Version=${VERSION} \
        -X github.com/prometheus/common/version.Revision=${REVISION} \
        -X github.com/prometheus/common/version.Branch=${BRANCH} \
        -X github.com/prometheus/common/version.BuildUser=docker \
        -X github.com/prometheus/common/version.BuildDate=${BUILD_DATE:-$(date -u +%Y%m%d-%H:%M:%S)}" \
      -o /out/vllm-normalizer ./cmd/vllm-normalizer

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/vllm-normalizer /bin/vllm-normalizer
# 65532 is distroless's "nonroot"; the binary writes nothing to disk, so a
# read-only root filesystem works.
USER 65532:65532
EXPOSE 9400
ENTRYPOINT ["/bin/vllm-normalizer"]
