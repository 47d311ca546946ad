// Package router holds the sim's emulation of the one router whose code
// cannot run here: llm-d-router (llmd/: its EPP, Envoy and the P/D
// sidecar). vllm-router and sgl-model-gateway are not emulated: the sim runs
// their clap binaries, built from their pinned sources (clusters/sim/upstream,
// make routers).
package router
