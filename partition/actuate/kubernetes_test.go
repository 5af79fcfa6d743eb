package actuate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The fake clientset's object tracker does not serve the scale
// subresource: GetScale gets the StatefulSet itself (and the typed client
// panics converting it to a Scale), UpdateScale fails to store a Scale as
// a StatefulSet. serveScale adds reactors that serve it from the tracked
// workload, as the API server does: spec.replicas both ways, and the
// workload's resourceVersion, checked on update (a stale one conflicts).
// The tracker keeps objects' resourceVersions as given, so the reactor
// bumps them itself.
func serveScale(cs *fake.Clientset) {
	for _, res := range []string{"statefulsets", "deployments"} {
		gvr := appsv1.SchemeGroupVersion.WithResource(res)
		gr := schema.GroupResource{Group: appsv1.GroupName, Resource: res}
		cs.PrependReactor("get", res, func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetSubresource() != "scale" {
				return false, nil, nil
			}
			obj, err := cs.Tracker().Get(gvr, a.GetNamespace(), a.(k8stesting.GetAction).GetName())
			if err != nil {
				return true, nil, err
			}
			return true, toScale(obj), nil
		})
		cs.PrependReactor("update", res, func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetSubresource() != "scale" {
				return false, nil, nil
			}
			sc := a.(k8stesting.UpdateAction).GetObject().(*autoscalingv1.Scale)
			obj, err := cs.Tracker().Get(gvr, a.GetNamespace(), sc.Name)
			if err != nil {
				return true, nil, err
			}
			m := obj.(metav1.Object)
			if sc.ResourceVersion != "" && sc.ResourceVersion != m.GetResourceVersion() {
				return true, nil, apierrors.NewConflict(gr, sc.Name, errors.New("the object has been modified"))
			}
			rv, _ := strconv.Atoi(m.GetResourceVersion())
			m.SetResourceVersion(strconv.Itoa(rv + 1))
			r := sc.Spec.Replicas
			switch w := obj.(type) {
			case *appsv1.StatefulSet:
				w.Spec.Replicas = &r
			case *appsv1.Deployment:
				w.Spec.Replicas = &r
			}
			if err := cs.Tracker().Update(gvr, obj, a.GetNamespace()); err != nil {
				return true, nil, err
			}
			return true, toScale(obj), nil
		})
	}
}

func toScale(obj runtime.Object) *autoscalingv1.Scale {
	var replicas *int32
	var status int32
	switch w := obj.(type) {
	case *appsv1.StatefulSet:
		replicas, status = w.Spec.Replicas, w.Status.Replicas
	case *appsv1.Deployment:
		replicas, status = w.Spec.Replicas, w.Status.Replicas
	default:
		panic(fmt.Sprintf("no scale for %T", obj))
	}
	m := obj.(metav1.Object)
	s := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: m.GetName(), Namespace: m.GetNamespace(),
		ResourceVersion: m.GetResourceVersion()}, Status: autoscalingv1.ScaleStatus{Replicas: status}}
	if replicas != nil {
		s.Spec.Replicas = *replicas
	} else {
		s.Spec.Replicas = 1 // the API server's default
	}
	return s
}

func workload(kind Workload, ns, name string, replicas int32) runtime.Object {
	meta := metav1.ObjectMeta{Name: name, Namespace: ns, ResourceVersion: "1"}
	if kind == StatefulSet {
		return &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Replicas: &replicas}}
	}
	return &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: &replicas}}
}

// replicas reads the workload's spec.replicas as stored.
func replicas(t *testing.T, cs *fake.Clientset, kind Workload, ns, name string) int32 {
	t.Helper()
	ctx := context.Background()
	if kind == StatefulSet {
		w, err := cs.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return *w.Spec.Replicas
	}
	w, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return *w.Spec.Replicas
}

// updates counts the scale updates the client sent.
func updates(cs *fake.Clientset) int {
	n := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "scale" {
			n++
		}
	}
	return n
}

func TestKubernetesResize(t *testing.T) {
	for _, kind := range []Workload{StatefulSet, Deployment} {
		t.Run(string(kind), func(t *testing.T) {
			// A same-named workload of the other kind and one in another
			// namespace must stay untouched.
			other := Deployment
			if kind == Deployment {
				other = StatefulSet
			}
			cs := fake.NewClientset(workload(kind, "gpu", "backends", 2), workload(other, "gpu", "backends", 7),
				workload(kind, "default", "backends", 5))
			serveScale(cs)
			k, err := NewKubernetes(KubernetesConfig{Apps: cs.AppsV1(), Namespace: "gpu", Kind: kind, Name: "backends"})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if n, err := k.Size(ctx); err != nil || n != 2 {
				t.Fatalf("Size %d, %v; want 2", n, err)
			}
			for _, n := range []int{5, 1, 0} {
				if err := k.Resize(ctx, n); err != nil {
					t.Fatalf("Resize(%d): %v", n, err)
				}
				if got, err := k.Size(ctx); err != nil || got != n {
					t.Fatalf("after Resize(%d): Size %d, %v", n, got, err)
				}
				if got := replicas(t, cs, kind, "gpu", "backends"); got != int32(n) {
					t.Fatalf("after Resize(%d): spec.replicas %d", n, got)
				}
			}
			if u := updates(cs); u != 3 {
				t.Fatalf("%d scale updates, want 3", u)
			}
			// Resizing to the size it has writes nothing.
			if err := k.Resize(ctx, 0); err != nil {
				t.Fatal(err)
			}
			if u := updates(cs); u != 3 {
				t.Fatalf("%d scale updates after a no-op Resize, want 3", u)
			}
			if got := replicas(t, cs, other, "gpu", "backends"); got != 7 {
				t.Fatalf("the %s of the same name was scaled to %d", other, got)
			}
			if got := replicas(t, cs, kind, "default", "backends"); got != 5 {
				t.Fatalf("the %s in another namespace was scaled to %d", kind, got)
			}
		})
	}
}

func TestKubernetesConflictRetries(t *testing.T) {
	cs := fake.NewClientset(workload(StatefulSet, "default", "backends", 2))
	serveScale(cs)
	// Another writer scales the set between our read and our write, twice.
	raced := 0
	cs.PrependReactor("update", "statefulsets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "scale" || raced == 2 {
			return false, nil, nil
		}
		raced++
		gvr := appsv1.SchemeGroupVersion.WithResource("statefulsets")
		obj, _ := cs.Tracker().Get(gvr, "default", "backends")
		obj.(metav1.Object).SetResourceVersion(fmt.Sprintf("race-%d", raced))
		if err := cs.Tracker().Update(gvr, obj, "default"); err != nil {
			return true, nil, err
		}
		return false, nil, nil // on to serveScale's reactor, which sees the stale version
	})
	k, err := NewKubernetes(KubernetesConfig{Apps: cs.AppsV1(), Kind: StatefulSet, Name: "backends"})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Resize(context.Background(), 4); err != nil {
		t.Fatalf("Resize after two conflicts: %v", err)
	}
	if got := replicas(t, cs, StatefulSet, "default", "backends"); got != 4 {
		t.Fatalf("spec.replicas %d, want 4", got)
	}
	if u := updates(cs); u != 3 {
		t.Fatalf("%d scale updates, want 3 (two conflicts, then the write)", u)
	}

	// A writer that always wins: Resize gives up with the conflict.
	raced = -100
	err = k.Resize(context.Background(), 6)
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "conflicts in a row") {
		t.Fatalf("Resize against a writer that always wins: %v, want a conflict", err)
	}
}

func TestKubernetesErrors(t *testing.T) {
	cs := fake.NewClientset()
	serveScale(cs)
	k, err := NewKubernetes(KubernetesConfig{Apps: cs.AppsV1(), Kind: Deployment, Name: "missing"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := k.Size(ctx); !apierrors.IsNotFound(err) {
		t.Errorf("Size of a missing deployment: %v, want not found", err)
	}
	if err := k.Resize(ctx, 1); !apierrors.IsNotFound(err) {
		t.Errorf("Resize of a missing deployment: %v, want not found", err)
	}
	if err := k.Resize(ctx, -1); err == nil {
		t.Error("Resize(-1): no error")
	}
	// A forbidden update (RBAC without deployments/scale) is reported as is.
	cs2 := fake.NewClientset(workload(Deployment, "default", "d", 1))
	serveScale(cs2)
	cs2.PrependReactor("update", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments/scale"}, "d", errors.New("rbac"))
	})
	k2, _ := NewKubernetes(KubernetesConfig{Apps: cs2.AppsV1(), Kind: Deployment, Name: "d"})
	if err := k2.Resize(ctx, 3); !apierrors.IsForbidden(err) {
		t.Errorf("forbidden Resize: %v, want forbidden", err)
	}

	bad := []struct {
		name string
		cfg  KubernetesConfig
		msg  string
	}{
		{"no client", KubernetesConfig{Kind: StatefulSet, Name: "x"}, "no apps/v1 client"},
		{"no name", KubernetesConfig{Apps: cs.AppsV1(), Kind: StatefulSet}, "no workload name"},
		{"bad kind", KubernetesConfig{Apps: cs.AppsV1(), Kind: "DaemonSet", Name: "x"}, `workload kind "DaemonSet"`},
	}
	for _, b := range bad {
		if _, err := NewKubernetes(b.cfg); err == nil || !strings.Contains(err.Error(), b.msg) {
			t.Errorf("%s: %v, want %q", b.name, err, b.msg)
		}
	}
}
