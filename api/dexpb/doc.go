// Package dexpb is the Go code generated from the Dex-ZD API contract in
// api/proto/dex (proto package dex): the messages, and the gRPC clients and
// servers of dex.FlowService (clients), dex.WorkerTaskService (workers) and
// dex.AdminService (operators). The .proto files are the API reference.
//
// Do not edit the *.pb.go files. Change the .proto files and run
// scripts/generate.sh, or `make generate` (which runs `go generate ./...`
// and so the directive below); `make verify` fails when the committed code is
// out of date.
package dexpb

//go:generate ../../scripts/generate.sh
