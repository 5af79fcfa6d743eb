// Package inferencepb is the KServe v2 inference protocol over gRPC (the
// Open Inference Protocol's GRPCInferenceService, package inference),
// with Triton's model repository extension: the messages, and the client
// and server stubs, that package gateway serves and `symphony bench
// --grpc` drives. The names and field numbers are the protocol's, so that
// KServe's and Triton's gRPC clients interoperate with it.
//
// The Go code is generated from inference.proto and committed; CI does
// not run protoc. After editing the .proto, regenerate it from the
// repository's root with
//
//	make proto
//
// which checks for protoc 3.21.12 (Debian 12's: apt-get install
// protobuf-compiler), installs the pinned plugins into .cache/bin and
// runs
//
//	GOBIN=$PWD/.cache/bin go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	GOBIN=$PWD/.cache/bin go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
//	PATH="$PWD/.cache/bin:$PATH" protoc --proto_path=. \
//	  --go_out=. --go_opt=paths=source_relative \
//	  --go-grpc_out=. --go-grpc_opt=paths=source_relative \
//	  frontend/gateway/inferencepb/inference.proto
package inferencepb
