// Command render prints what `helm install` creates for a chart with its default values: the
// chart's manifests in Helm's install order (Namespaces, CRDs, ServiceAccounts, Secrets, ... the
// kinds Helm does not know last), each with the metadata Helm's install sets on the objects it
// creates (the `app.kubernetes.io/managed-by: Helm` label and the `meta.helm.sh/release-name`
// and `-namespace` annotations). Hooks are left out: the cluster test runs none of them.
//
//	go run . -namespace kubewarden -kube-version v1.34.3 RELEASE CHART_DIR
//
// It is a Go module of its own so that Helm's dependencies (k8s.io libraries newer than the
// cluster test's) neither share the cluster test's go.mod nor change its go.sum, which keys
// build.sh's binaries.
//
// Rendered as `helm install` does on a first install: in Helm's client-only mode, whose
// `lookup` finds nothing, as the real one finds nothing in a cluster the chart was never
// installed on (the controller chart's webhook certificates are then generated at render time,
// as they are by a first `helm install`).
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"sigs.k8s.io/yaml"
)

func main() {
	namespace := flag.String("namespace", "default", "the release's namespace (helm install --namespace)")
	kubeVersion := flag.String("kube-version", "", "the API server's version, for the chart's kubeVersion and .Capabilities")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: render [-namespace NS] [-kube-version V] RELEASE CHART_DIR\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 2 {
		flag.Usage()
		os.Exit(2)
	}
	out, err := render(flag.Arg(0), flag.Arg(1), *namespace, *kubeVersion)
	if err != nil {
		fmt.Fprintf(os.Stderr, "render %s: %v\n", flag.Arg(1), err)
		os.Exit(1)
	}
	os.Stdout.Write(out)
}

func render(release, chartDir, namespace, kubeVersion string) ([]byte, error) {
	chart, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.ReleaseName = release
	install.Namespace = namespace
	install.DryRun = true
	install.ClientOnly = true
	if kubeVersion != "" {
		install.KubeVersion, err = chartutil.ParseKubeVersion(kubeVersion)
		if err != nil {
			return nil, err
		}
	}
	// The chart's own values.yaml, nothing given on the command line.
	rel, err := install.Run(chart, map[string]any{})
	if err != nil {
		return nil, err
	}
	var docs []string
	for _, doc := range strings.Split(rel.Manifest, "\n---\n") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return nil, fmt.Errorf("a rendered manifest: %w\n%s", err, doc)
		}
		if len(obj) == 0 {
			continue
		}
		setHelmMetadata(obj, release, namespace)
		out, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		docs = append(docs, string(out))
	}
	return []byte(strings.Join(docs, "---\n")), nil
}

// setHelmMetadata is what Helm's install sets on every object it creates, so that a later
// `helm upgrade` or `helm uninstall` knows it owns it.
func setHelmMetadata(obj map[string]any, release, namespace string) {
	metadata, _ := obj["metadata"].(map[string]any)
	if metadata == nil {
		metadata = map[string]any{}
		obj["metadata"] = metadata
	}
	set := func(field string, values map[string]string) {
		m, _ := metadata[field].(map[string]any)
		if m == nil {
			m = map[string]any{}
			metadata[field] = m
		}
		for k, v := range values {
			m[k] = v
		}
	}
	set("labels", map[string]string{"app.kubernetes.io/managed-by": "Helm"})
	set("annotations", map[string]string{
		"meta.helm.sh/release-name":      release,
		"meta.helm.sh/release-namespace": namespace,
	})
}
