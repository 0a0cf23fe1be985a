module github.com/fos-study/vllm-normalizer/e2e/consumers/harness

go 1.26.8
