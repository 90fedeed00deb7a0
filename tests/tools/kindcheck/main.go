// Command kindcheck validates kind cluster configs with kind v0.33.0's own code, without Docker.
//
// For each file it does what `kind create cluster --config FILE` does before it starts a container:
// strict decode of the v1alpha4 types (an unknown field is an error naming it), defaulting and
// conversion to kind's internal config, and Cluster.Validate. Then, per node, it renders the kubeadm
// configuration kind would write to the node (kind's template for the node image's Kubernetes
// version) and applies the config's kubeadmConfigPatches with kind's patch code. One check is
// stricter than kind: a kubeadm patch that matches no generated document (a misspelt kind) is an
// error, where kind silently ignores it.
//
// Output: one JSON document on stdout (per file: the cluster name and, per node, role, image,
// labels, extra mounts and the patched kubeadm YAML). Exit 1 with the reason on stderr when a file
// is invalid, 2 on a usage error.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"sigs.k8s.io/kind/pkg/cluster/constants"
	"sigs.k8s.io/kind/pkg/cluster/internal/kubeadm"
	"sigs.k8s.io/kind/pkg/cluster/internal/providers/common"
	"sigs.k8s.io/kind/pkg/internal/apis/config"
	"sigs.k8s.io/kind/pkg/internal/apis/config/encoding"
	"sigs.k8s.io/kind/pkg/internal/patch"
)

type mount struct {
	HostPath      string `json:"hostPath"`
	ContainerPath string `json:"containerPath"`
}

type nodeReport struct {
	Name        string            `json:"name"`
	Role        string            `json:"role"`
	Image       string            `json:"image"`
	KubeVersion string            `json:"kubernetesVersion"`
	Labels      map[string]string `json:"labels"`
	ExtraMounts []mount           `json:"extraMounts"`
	Kubeadm     string            `json:"kubeadm"`
}

type fileReport struct {
	File    string       `json:"file"`
	Cluster string       `json:"cluster"`
	Nodes   []nodeReport `json:"nodes"`
}

func main() {
	name := flag.String("name", constants.DefaultClusterName, "cluster name, as `kind create cluster --name` (used when the file has none)")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: kindcheck [-name NAME] FILE...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	var reports []fileReport
	failed := false
	for _, path := range flag.Args() {
		r, err := check(path, *name)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kindcheck: %s: %v\n", path, err)
			failed = true
			continue
		}
		reports = append(reports, r)
	}
	out, _ := json.MarshalIndent(reports, "", " ")
	fmt.Println(string(out))
	if failed {
		os.Exit(1)
	}
}

// check loads, validates and renders one config file the way kind v0.33.0 does.
func check(path, nameOverride string) (fileReport, error) {
	cfg, err := encoding.Load(path) // strict v1alpha4 decode, defaults, conversion
	if err != nil {
		return fileReport{}, err
	}
	if cfg.Name == "" {
		cfg.Name = nameOverride
	}
	if err := cfg.Validate(); err != nil {
		return fileReport{}, fmt.Errorf("invalid config: %w", err)
	}
	rep := fileReport{File: path, Cluster: cfg.Name}
	namer := common.MakeNodeNamer(cfg.Name)
	for i := range cfg.Nodes {
		n := &cfg.Nodes[i]
		nodeName := namer(string(n.Role))
		version, err := imageVersion(n.Image)
		if err != nil {
			return fileReport{}, fmt.Errorf("node %d (%s): %w", i, nodeName, err)
		}
		rendered, err := kubeadmFor(cfg, n, nodeName, version)
		if err != nil {
			return fileReport{}, fmt.Errorf("node %d (%s): %w", i, nodeName, err)
		}
		nr := nodeReport{Name: nodeName, Role: string(n.Role), Image: n.Image, KubeVersion: version,
			Labels: n.Labels, Kubeadm: rendered}
		for _, m := range n.ExtraMounts {
			nr.ExtraMounts = append(nr.ExtraMounts, mount{HostPath: m.HostPath, ContainerPath: m.ContainerPath})
		}
		rep.Nodes = append(rep.Nodes, nr)
	}
	return rep, nil
}

// imageVersion is the Kubernetes version in a kindest/node image reference ("...:v1.36.4@sha256:...").
func imageVersion(image string) (string, error) {
	ref := strings.SplitN(image, "@", 2)[0]
	slash := strings.LastIndex(ref, "/")
	colon := strings.LastIndex(ref, ":")
	if colon <= slash || !strings.HasPrefix(ref[colon+1:], "v") {
		return "", fmt.Errorf("image %q has no vX.Y.Z tag to read the Kubernetes version from", image)
	}
	return ref[colon+1:], nil
}

// kubeadmFor renders the kubeadm config kind writes to this node and applies the config's patches
// (cluster-level first, then the node's), as kind's create action does.
func kubeadmFor(cfg *config.Cluster, n *config.Node, nodeName, version string) (string, error) {
	data := kubeadm.ConfigData{
		NodeProvider:         "docker",
		ClusterName:          cfg.Name,
		KubernetesVersion:    version,
		ControlPlaneEndpoint: fmt.Sprintf("%s-control-plane:%d", cfg.Name, common.APIServerInternalPort),
		APIBindPort:          common.APIServerInternalPort,
		APIServerAddress:     cfg.Networking.APIServerAddress,
		Token:                kubeadm.Token,
		PodSubnet:            cfg.Networking.PodSubnet,
		KubeProxyMode:        string(cfg.Networking.KubeProxyMode),
		ServiceSubnet:        cfg.Networking.ServiceSubnet,
		ControlPlane:         n.Role == config.ControlPlaneRole,
		IPFamily:             cfg.Networking.IPFamily,
		FeatureGates:         cfg.FeatureGates,
		RuntimeConfig:        cfg.RuntimeConfig,
		NodeName:             nodeName,
		NodeAddress:          "172.18.0.2", // Docker assigns it at creation; a placeholder of the same form
		NodeLabels:           labelString(n.Labels),
	}
	rendered, err := kubeadm.Config(data)
	if err != nil {
		return "", fmt.Errorf("kubeadm config template: %w", err)
	}
	if err := patchesMatch(rendered, cfg.KubeadmConfigPatches, "cluster"); err != nil {
		return "", err
	}
	if err := patchesMatch(rendered, n.KubeadmConfigPatches, "node"); err != nil {
		return "", err
	}
	patched, err := patch.KubeYAML(rendered, cfg.KubeadmConfigPatches, cfg.KubeadmConfigPatchesJSON6902)
	if err != nil {
		return "", fmt.Errorf("cluster kubeadmConfigPatches: %w", err)
	}
	patched, err = patch.KubeYAML(patched, n.KubeadmConfigPatches, n.KubeadmConfigPatchesJSON6902)
	if err != nil {
		return "", fmt.Errorf("node kubeadmConfigPatches: %w", err)
	}
	return strings.ReplaceAll(patched, "metadata:\n  name: config\n", ""), nil
}

type typeMeta struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
}

// patchesMatch fails when a patch's kind (and apiVersion, if it names one) matches no document of
// the rendered config: kind's own rule for applying a patch, made an error instead of a no-op.
func patchesMatch(rendered string, patches []string, where string) error {
	var docs []typeMeta
	for _, d := range strings.Split(rendered, "\n---\n") {
		var tm typeMeta
		if err := yaml.Unmarshal([]byte(d), &tm); err == nil && tm.Kind != "" {
			docs = append(docs, tm)
		}
	}
	for i, p := range patches {
		var tm typeMeta
		if err := yaml.Unmarshal([]byte(p), &tm); err != nil {
			return fmt.Errorf("%s kubeadmConfigPatches[%d]: %w", where, i, err)
		}
		matched := false
		for _, d := range docs {
			if d.Kind == tm.Kind && (tm.APIVersion == "" || tm.APIVersion == d.APIVersion) {
				matched = true
			}
		}
		if !matched {
			var kinds []string
			for _, d := range docs {
				kinds = append(kinds, d.APIVersion+" "+d.Kind)
			}
			return fmt.Errorf("%s kubeadmConfigPatches[%d] (kind %q, apiVersion %q) matches none of the documents kind generates for this node (%s): kind would ignore it",
				where, i, tm.Kind, tm.APIVersion, strings.Join(kinds, ", "))
		}
	}
	return nil
}

// labelString is the node-labels kubelet flag value kind derives from a node's labels (sorted here).
func labelString(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ",")
}
