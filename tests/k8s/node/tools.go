//go:build tools

// Package tools keeps the node's programs in go.mod and go.sum: the kubelet of the same
// pinned Kubernetes release as the control plane (../go.mod). ../build.sh --node builds it.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kubelet"
)
