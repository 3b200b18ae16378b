// Package kubernetes holds the test of the Kubernetes manifests of this
// folder: each is decoded strictly into the Kubernetes API types (an unknown
// or misspelt field fails), KEDA's ScaledObject into a copy of the fields of
// KEDA's type it uses, and the references between them are checked.
//
// It is a module of its own so that taskd's go.mod stays free of k8s.io.
package kubernetes

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// ScaledObject is KEDA's keda.sh/v1alpha1 ScaledObject with the fields of
// github.com/kedacore/keda/v2/apis/keda/v1alpha1 (scaledobject_types.go, KEDA
// 2.x) that these manifests may use, with the same JSON names. KEDA's module
// is not imported: it requires every scaler's cloud SDK.
type ScaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ScaledObjectSpec `json:"spec"`
}

// ScaledObjectSpec is KEDA's ScaledObjectSpec.
type ScaledObjectSpec struct {
	ScaleTargetRef        *ScaleTarget    `json:"scaleTargetRef"`
	PollingInterval       *int32          `json:"pollingInterval,omitempty"`
	InitialCooldownPeriod *int32          `json:"initialCooldownPeriod,omitempty"`
	CooldownPeriod        *int32          `json:"cooldownPeriod,omitempty"`
	IdleReplicaCount      *int32          `json:"idleReplicaCount,omitempty"`
	MinReplicaCount       *int32          `json:"minReplicaCount,omitempty"`
	MaxReplicaCount       *int32          `json:"maxReplicaCount,omitempty"`
	Advanced              *AdvancedConfig `json:"advanced,omitempty"`
	Triggers              []ScaleTriggers `json:"triggers"`
	Fallback              *Fallback       `json:"fallback,omitempty"`
}

// ScaleTarget is KEDA's ScaleTarget.
type ScaleTarget struct {
	Name                   string `json:"name"`
	APIVersion             string `json:"apiVersion,omitempty"`
	Kind                   string `json:"kind,omitempty"`
	EnvSourceContainerName string `json:"envSourceContainerName,omitempty"`
}

// AdvancedConfig is KEDA's AdvancedConfig, without scalingModifiers.
type AdvancedConfig struct {
	HorizontalPodAutoscalerConfig *HorizontalPodAutoscalerConfig `json:"horizontalPodAutoscalerConfig,omitempty"`
	RestoreToOriginalReplicaCount bool                           `json:"restoreToOriginalReplicaCount,omitempty"`
}

// HorizontalPodAutoscalerConfig is KEDA's, with Kubernetes' own behavior type.
type HorizontalPodAutoscalerConfig struct {
	Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
	Name     string                                         `json:"name,omitempty"`
}

// ScaleTriggers is KEDA's ScaleTriggers.
type ScaleTriggers struct {
	Type              string                         `json:"type"`
	Name              string                         `json:"name,omitempty"`
	UseCachedMetrics  bool                           `json:"useCachedMetrics,omitempty"`
	Metadata          map[string]string              `json:"metadata"`
	AuthenticationRef *AuthenticationRef             `json:"authenticationRef,omitempty"`
	MetricType        autoscalingv2.MetricTargetType `json:"metricType,omitempty"`
}

// AuthenticationRef is KEDA's AuthenticationRef.
type AuthenticationRef struct {
	Name string `json:"name"`
	Kind string `json:"kind,omitempty"`
}

// Fallback is KEDA's Fallback.
type Fallback struct {
	FailureThreshold int32 `json:"failureThreshold"`
	Replicas         int32 `json:"replicas"`
}

// prometheusScalerKeys are the metadata keys of KEDA's Prometheus scaler
// (keda.sh/docs/2.x/scalers/prometheus).
var prometheusScalerKeys = []string{
	"serverAddress", "query", "queryParameters", "threshold", "activationThreshold",
	"namespace", "customHeaders", "ignoreNullValues", "unsafeSsl", "timeout",
}

// manifests is every object of the folder, by kind.
type manifests struct {
	deployments   map[string]*appsv1.Deployment
	services      map[string]*corev1.Service
	configMaps    map[string]*corev1.ConfigMap
	secrets       map[string]*corev1.Secret
	pdbs          map[string]*policyv1.PodDisruptionBudget
	scaledObjects map[string]*ScaledObject
	files         []string
}

// strict decodes one YAML document into out; an unknown field is an error.
func strict(doc []byte, out any) error {
	return yaml.UnmarshalStrict(doc, out)
}

// load decodes every document of every *.yaml file but kustomization.yaml.
func load(t *testing.T) *manifests {
	t.Helper()
	m := &manifests{
		deployments:   map[string]*appsv1.Deployment{},
		services:      map[string]*corev1.Service{},
		configMaps:    map[string]*corev1.ConfigMap{},
		secrets:       map[string]*corev1.Secret{},
		pdbs:          map[string]*policyv1.PodDisruptionBudget{},
		scaledObjects: map[string]*ScaledObject{},
	}
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		if file == "kustomization.yaml" {
			continue
		}
		m.files = append(m.files, file)
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(b, []byte("\n---\n")) {
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s, document %d: %v", file, i+1, err)
			}
			var name string
			var err error
			switch gvk := tm.APIVersion + " " + tm.Kind; gvk {
			case "apps/v1 Deployment":
				var o appsv1.Deployment
				err, name = strict(doc, &o), o.Name
				m.deployments[name] = &o
			case "v1 Service":
				var o corev1.Service
				err, name = strict(doc, &o), o.Name
				m.services[name] = &o
			case "v1 ConfigMap":
				var o corev1.ConfigMap
				err, name = strict(doc, &o), o.Name
				m.configMaps[name] = &o
			case "v1 Secret":
				var o corev1.Secret
				err, name = strict(doc, &o), o.Name
				m.secrets[name] = &o
			case "policy/v1 PodDisruptionBudget":
				var o policyv1.PodDisruptionBudget
				err, name = strict(doc, &o), o.Name
				m.pdbs[name] = &o
			case "keda.sh/v1alpha1 ScaledObject":
				var o ScaledObject
				err, name = strict(doc, &o), o.Name
				m.scaledObjects[name] = &o
			default:
				t.Fatalf("%s, document %d: %q is not a kind this test knows; add it", file, i+1, gvk)
			}
			if err != nil {
				t.Errorf("%s, document %d (%s %s): %v", file, i+1, tm.Kind, name, err)
			}
			if name == "" {
				t.Errorf("%s, document %d (%s): no metadata.name", file, i+1, tm.Kind)
			}
		}
	}
	return m
}

// TestManifestsDecodeStrictly checks that every manifest is a known kind whose
// every field is one of its API type's, and that kustomization.yaml lists
// every file.
func TestManifestsDecodeStrictly(t *testing.T) {
	m := load(t)
	for kind, n := range map[string]int{
		"Deployment": len(m.deployments), "Service": len(m.services), "ConfigMap": len(m.configMaps),
		"Secret": len(m.secrets), "PodDisruptionBudget": len(m.pdbs), "ScaledObject": len(m.scaledObjects),
	} {
		if n == 0 {
			t.Errorf("no %s found", kind)
		}
	}
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	b, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := strict(b, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	got, want := slices.Sorted(slices.Values(k.Resources)), slices.Sorted(slices.Values(m.files))
	if !slices.Equal(got, want) {
		t.Errorf("kustomization.yaml lists %v, want every manifest of the folder %v", got, want)
	}
}

// TestStrictDecodingRefusesUnknownFields proves the decoding is strict: a
// misspelt field fails.
func TestStrictDecodingRefusesUnknownFields(t *testing.T) {
	doc := []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replica: 2\n")
	if err := strict(doc, &appsv1.Deployment{}); err == nil || !strings.Contains(err.Error(), "replica") {
		t.Errorf("a Deployment with spec.replica decoded with error %v, want one naming the field", err)
	}
	doc = []byte("apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: x}\nspec:\n  scaleTargetRef: {name: x}\n  maxReplicas: 3\n  triggers: []\n")
	if err := strict(doc, &ScaledObject{}); err == nil || !strings.Contains(err.Error(), "maxReplicas") {
		t.Errorf("a ScaledObject with spec.maxReplicas decoded with error %v, want one naming the field", err)
	}
}

// TestManifestsReferToEachOther checks the references: selectors select their
// pod templates' labels, probes name container ports, mounted ConfigMaps and
// Secrets exist (with config.yaml), the Service reaches a port of the pods
// it selects, the budgets select pods, and the ScaledObject scales a
// Deployment of the folder on the oldest claimable task's age.
func TestManifestsReferToEachOther(t *testing.T) {
	m := load(t)
	for _, component := range []string{"serve", "work"} {
		if m.deployments["taskd-"+component] == nil {
			t.Errorf("no Deployment taskd-%s", component)
		}
	}
	for name, d := range m.deployments {
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || sel.Empty() {
			t.Errorf("Deployment %s: selector %v: %v (want a non-empty one)", name, d.Spec.Selector, err)
			continue
		}
		if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("Deployment %s: selector %s does not match its pod template's labels %v", name, sel, d.Spec.Template.Labels)
		}
		for other, o := range m.deployments {
			if other != name && sel.Matches(labels.Set(o.Spec.Template.Labels)) {
				t.Errorf("Deployment %s's selector %s also matches Deployment %s's pods", name, sel, other)
			}
		}
		pod := d.Spec.Template.Spec
		if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
			t.Errorf("Deployment %s: the pod does not set runAsNonRoot", name)
		}
		volumes := map[string]corev1.Volume{}
		for _, v := range pod.Volumes {
			volumes[v.Name] = v
			switch {
			case v.ConfigMap != nil:
				cm := m.configMaps[v.ConfigMap.Name]
				if cm == nil {
					t.Errorf("Deployment %s: volume %s mounts ConfigMap %q, which no manifest defines", name, v.Name, v.ConfigMap.Name)
				} else if _, ok := cm.Data["config.yaml"]; !ok {
					t.Errorf("Deployment %s: ConfigMap %s has no config.yaml", name, cm.Name)
				}
			case v.Secret != nil:
				if m.secrets[v.Secret.SecretName] == nil {
					t.Errorf("Deployment %s: volume %s mounts Secret %q, which no manifest defines", name, v.Name, v.Secret.SecretName)
				}
			}
		}
		containers := append(slices.Clone(pod.InitContainers), pod.Containers...)
		for _, c := range containers {
			where := fmt.Sprintf("Deployment %s, container %s", name, c.Name)
			if c.Image == "" {
				t.Errorf("%s: no image", where)
			}
			for _, vm := range c.VolumeMounts {
				if _, ok := volumes[vm.Name]; !ok {
					t.Errorf("%s: mounts volume %q, which the pod does not have", where, vm.Name)
				}
			}
			for _, ef := range c.EnvFrom {
				if ef.SecretRef != nil && m.secrets[ef.SecretRef.Name] == nil {
					t.Errorf("%s: takes its environment from Secret %q, which no manifest defines", where, ef.SecretRef.Name)
				}
				if ef.ConfigMapRef != nil && m.configMaps[ef.ConfigMapRef.Name] == nil {
					t.Errorf("%s: takes its environment from ConfigMap %q, which no manifest defines", where, ef.ConfigMapRef.Name)
				}
			}
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					s := m.secrets[e.ValueFrom.SecretKeyRef.Name]
					if _, ok := s.StringData[e.ValueFrom.SecretKeyRef.Key]; s == nil || !ok {
						t.Errorf("%s: %s takes key %s of Secret %q, which no manifest defines", where, e.Name, e.ValueFrom.SecretKeyRef.Key, e.ValueFrom.SecretKeyRef.Name)
					}
				}
			}
		}
		for _, c := range pod.Containers {
			where := fmt.Sprintf("Deployment %s, container %s", name, c.Name)
			if c.LivenessProbe == nil || c.ReadinessProbe == nil {
				t.Errorf("%s: want a liveness and a readiness probe", where)
			}
			for probe, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe, "startup": c.StartupProbe} {
				if p == nil {
					continue
				}
				if p.HTTPGet == nil {
					t.Errorf("%s: %s probe is not an HTTP GET", where, probe)
					continue
				}
				if !slices.Contains([]string{"/healthz", "/readyz"}, p.HTTPGet.Path) {
					t.Errorf("%s: %s probe GETs %s, want /healthz or /readyz", where, probe, p.HTTPGet.Path)
				}
				if !hasPort(c, p.HTTPGet.Port.String()) {
					t.Errorf("%s: %s probe's port %s is none of the container's ports", where, probe, p.HTTPGet.Port.String())
				}
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("%s: want CPU and memory requests and a memory limit, got %v", where, c.Resources)
			}
		}
	}
	// worker.metrics_addr must be the port the workers' probes use: `taskd
	// work` serves /healthz nowhere else. http.addr likewise for serve.
	cfg := m.configMaps["taskd-config"]
	if cfg == nil {
		t.Fatal("no ConfigMap taskd-config")
	}
	var serveConf struct {
		HTTP struct {
			Addr string `json:"addr"`
		} `json:"http"`
		Worker struct {
			MetricsAddr string `json:"metrics_addr"`
		} `json:"worker"`
	}
	if err := yaml.Unmarshal([]byte(cfg.Data["config.yaml"]), &serveConf); err != nil {
		t.Fatal(err)
	}
	for name, addr := range map[string]string{"taskd-serve": serveConf.HTTP.Addr, "taskd-work": serveConf.Worker.MetricsAddr} {
		d := m.deployments[name]
		if d == nil {
			continue
		}
		_, port, ok := strings.Cut(addr, ":")
		if !ok || strings.HasPrefix(addr, "127.") || strings.HasPrefix(addr, "localhost") {
			t.Errorf("config.yaml gives %s the address %q, want \":port\" on every interface, where the kubelet's probes reach it", name, addr)
			continue
		}
		c := d.Spec.Template.Spec.Containers[0]
		if p := c.LivenessProbe; p != nil && p.HTTPGet != nil && portNumber(c, p.HTTPGet.Port.String()) != port {
			t.Errorf("%s's liveness probe reaches port %s, but config.yaml makes it listen on %s", name, portNumber(c, p.HTTPGet.Port.String()), addr)
		}
	}

	for name, s := range m.services {
		sel := labels.SelectorFromSet(s.Spec.Selector)
		n := 0
		for _, d := range m.deployments {
			if len(s.Spec.Selector) == 0 || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				continue
			}
			n++
			for _, sp := range s.Spec.Ports {
				if !hasPort(d.Spec.Template.Spec.Containers[0], sp.TargetPort.String()) {
					t.Errorf("Service %s: target port %s is no port of Deployment %s's container", name, sp.TargetPort.String(), d.Name)
				}
			}
		}
		if n == 0 {
			t.Errorf("Service %s selects no Deployment's pods (%v)", name, s.Spec.Selector)
		}
	}
	for name, p := range m.pdbs {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		n := 0
		for _, d := range m.deployments {
			if err == nil && !sel.Empty() && sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("PodDisruptionBudget %s selects the pods of %d Deployments, want 1", name, n)
		}
		if (p.Spec.MinAvailable == nil) == (p.Spec.MaxUnavailable == nil) {
			t.Errorf("PodDisruptionBudget %s: want exactly one of minAvailable and maxUnavailable", name)
		}
	}
	so := m.scaledObjects["taskd-work"]
	if so == nil {
		t.Fatal("no ScaledObject taskd-work")
	}
	ref := so.Spec.ScaleTargetRef
	if ref == nil || m.deployments[ref.Name] == nil || (ref.Kind != "" && ref.Kind != "Deployment") {
		t.Errorf("ScaledObject %s scales %+v, want a Deployment of the folder", so.Name, ref)
	}
	if so.Spec.MinReplicaCount == nil || so.Spec.MaxReplicaCount == nil || *so.Spec.MinReplicaCount > *so.Spec.MaxReplicaCount {
		t.Errorf("ScaledObject %s: want minReplicaCount <= maxReplicaCount, both set", so.Name)
	}
	if len(so.Spec.Triggers) != 1 {
		t.Fatalf("ScaledObject %s has %d triggers, want 1", so.Name, len(so.Spec.Triggers))
	}
	tr := so.Spec.Triggers[0]
	if tr.Type != "prometheus" {
		t.Errorf("ScaledObject %s's trigger is %q, want prometheus", so.Name, tr.Type)
	}
	for k := range tr.Metadata {
		if !slices.Contains(prometheusScalerKeys, k) {
			t.Errorf("ScaledObject %s: metadata key %q is not one of the Prometheus scaler's %v", so.Name, k, prometheusScalerKeys)
		}
	}
	for _, k := range []string{"serverAddress", "query", "threshold"} {
		if tr.Metadata[k] == "" {
			t.Errorf("ScaledObject %s: the Prometheus scaler needs metadata.%s", so.Name, k)
		}
	}
	if q := tr.Metadata["query"]; !strings.Contains(q, "taskd_oldest_claimable_age_seconds") || !strings.Contains(q, "category") {
		t.Errorf("ScaledObject %s's query %q does not scale on taskd_oldest_claimable_age_seconds by category", so.Name, q)
	}
}

// hasPort says whether c has port, a name or a number.
func hasPort(c corev1.Container, port string) bool {
	return portNumber(c, port) != ""
}

// portNumber is the number of c's port named or numbered port, or "".
func portNumber(c corev1.Container, port string) string {
	for _, p := range c.Ports {
		if p.Name == port || fmt.Sprint(p.ContainerPort) == port {
			return fmt.Sprint(p.ContainerPort)
		}
	}
	return ""
}
