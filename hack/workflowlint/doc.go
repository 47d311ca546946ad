// Package workflowlint holds the test that lints .github/workflows with
// actionlint (github.com/rhysd/actionlint, as a library) in make test, and
// checks that the CI and nightly workflows keep the shape the project relies
// on: make test on push and pull request, the apiserver tier as a job of its
// own run as root (so a skipped tier fails it), and a nightly on a self-hosted GPU
// runner that uploads its evidence and fails when no GPU spec ran.
package workflowlint
