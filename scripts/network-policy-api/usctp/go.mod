// The build module of usctp, the user-space SCTP of the cnp suite's agnhost image
// (scripts/build-cnp-conformance.sh, agnhost-image.sh). `go mod tidy` keeps go.sum.
module knit.test/conformance-build/usctp

go 1.26.6

require (
	github.com/pion/logging v0.2.4
	github.com/pion/sctp v1.12.1
	github.com/pion/transport/v5 v5.1.4
)

require github.com/pion/randutil v0.1.0 // indirect
