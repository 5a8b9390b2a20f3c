module github.com/urbit-relay/relay

go 1.26.0

require (
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/hashicorp/golang-lru/v2 v2.0.7
	go.uber.org/zap v1.28.0
	golang.org/x/net v0.62.0
	golang.org/x/sys v0.50.0
)

require go.uber.org/multierr v1.10.0 // indirect
