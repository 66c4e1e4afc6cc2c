// The Go stubs of ragsvc.v1, written by `make generate` (buf generate with the Debian protoc-gen-go and
// protoc-gen-go-grpc). The module path is a placeholder until the project has a public home: import it
// with a replace directive, as docs/examples/go does.
module example.com/ragsvc/generated/go

go 1.19

require (
	google.golang.org/genproto v0.0.0-20200413115906-b5235f65be36
	google.golang.org/grpc v1.33.3
	google.golang.org/protobuf v1.28.1
)
