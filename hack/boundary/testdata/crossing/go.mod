module github.com/gpustack/routing-conformance

go 1.26
