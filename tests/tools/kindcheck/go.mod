// The module path sits under kind's own package tree on purpose: the go command allows an import of
// sigs.k8s.io/kind/pkg/internal/... and sigs.k8s.io/kind/pkg/cluster/internal/... from packages whose
// import path is under sigs.k8s.io/kind/pkg/cluster (golang/go#23970: in module mode the rule compares
// import paths), so this checker runs kind's own config loader, validation, kubeadm template and patch
// code instead of a copy of them. It is hollowscale's code, not part of kind.
module sigs.k8s.io/kind/pkg/cluster/hollowscalekindcheck

go 1.22

require (
	sigs.k8s.io/kind v0.33.0
	sigs.k8s.io/yaml v1.4.0
)

require (
	al.essio.dev/pkg/shellescape v1.5.1 // indirect
	github.com/BurntSushi/toml v1.4.0 // indirect
	github.com/evanphx/json-patch/v5 v5.6.0 // indirect
	github.com/pelletier/go-toml v1.9.5 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	go.yaml.in/yaml/v3 v3.0.4 // indirect
)
