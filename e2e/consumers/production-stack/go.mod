module github.com/fos-study/vllm-normalizer/e2e/consumers/production-stack

go 1.26.8

require github.com/fos-study/vllm-normalizer/e2e/consumers/harness v0.0.0

replace github.com/fos-study/vllm-normalizer/e2e/consumers/harness => ../harness
