# Convenience targets; each is one plain go command, so nothing here is
# required to build or test.
# Stamped into the binary (prometheus/common/version): --version,
# vllm_normalizer_build_info and the landing page show them.
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION   ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BRANCH     ?= $(shell git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)
BUILD_DATE ?= $(shell date -u +%Y%m%d-%H:%M:%S)
OUT        ?= vllm-normalizer
PKG        := github.com/prometheus/common/version
LDFLAGS    := -X $(PKG).Version=$(VERSION) -X $(PKG).Revision=$(REVISION) -X $(PKG).Branch=$(BRANCH) \
              -X $(PKG).BuildUser=$(shell whoami)@$(shell hostname) -X $(PKG).BuildDate=$(BUILD_DATE)

.PHONY: build test lint fuzz bench demo docker
build:
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o $(OUT) ./cmd/vllm-normalizer
test:
	go test -race -timeout 30m ./...
lint:
	test -z "$$(gofmt -l .)" && go vet ./...
fuzz:
	bash scripts/fuzz.sh 60
bench:
	go test -run '^$$' -bench . -benchmem ./...
demo:
	go run ./cmd/vllm-normalizer --demo
docker:
	docker build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) --build-arg BRANCH=$(BRANCH) --build-arg BUILD_DATE=$(BUILD_DATE) -t vllm-normalizer:$(VERSION) .
