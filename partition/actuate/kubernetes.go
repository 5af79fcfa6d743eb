package actuate

import (
	"context"
	"fmt"
	"math"

	"github.com/rs/zerolog"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	"k8s.io/client-go/util/retry"
)

// Workload is the kind of Kubernetes workload whose replicas are the
// backends.
type Workload string

const (
	// StatefulSet: backends with stable names (<name>-0, <name>-1, ...);
	// scale-in removes the highest ordinals first.
	StatefulSet Workload = "StatefulSet"
	// Deployment: interchangeable backends; scale-in removes the pods
	// the ReplicaSet controller ranks lowest (unready, then newest, or by
	// the controller.kubernetes.io/pod-deletion-cost annotation).
	Deployment Workload = "Deployment"
)

// DefaultNamespace is KubernetesConfig.Namespace's default, kubectl's.
const DefaultNamespace = "default"

// KubernetesConfig configures a Kubernetes actuator.
type KubernetesConfig struct {
	// Apps is the apps/v1 client: a clientset's AppsV1(), e.g. from
	// kubernetes.NewForConfig(rest.InClusterConfig()) (required). The
	// controller's service account needs get and update on the
	// workload's "scale" subresource (statefulsets/scale or
	// deployments/scale).
	Apps appsv1client.AppsV1Interface
	// Namespace holds the workload (DefaultNamespace if empty).
	Namespace string
	// Kind and Name name the workload (both required).
	Kind Workload
	Name string
	Log  zerolog.Logger
}

// scaler is the scale subresource of a StatefulSet or Deployment client:
// both have it with the same signatures.
type scaler interface {
	GetScale(ctx context.Context, name string, opts metav1.GetOptions) (*autoscalingv1.Scale, error)
	UpdateScale(ctx context.Context, name string, scale *autoscalingv1.Scale, opts metav1.UpdateOptions) (*autoscalingv1.Scale, error)
}

// Kubernetes is an Actuator that scales a StatefulSet or a Deployment
// whose pods are backends, through the scale subresource: the standard way
// (kubectl scale, the HorizontalPodAutoscaler) to change a workload's
// replicas without owning the rest of its spec. The cluster's own
// controllers then start and stop the pods; each backend pod registers
// itself with the registry once it runs.
//
// Its Size is the workload's spec.replicas: what was asked, pods still
// pending or booting included.
type Kubernetes struct {
	cfg KubernetesConfig
	s   scaler
	log zerolog.Logger
}

// NewKubernetes checks cfg and builds a Kubernetes actuator; it makes no
// request.
func NewKubernetes(cfg KubernetesConfig) (*Kubernetes, error) {
	if cfg.Apps == nil {
		return nil, fmt.Errorf("actuate: kubernetes: no apps/v1 client")
	}
	if cfg.Name == "" {
		return nil, fmt.Errorf("actuate: kubernetes: no workload name")
	}
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	k := &Kubernetes{cfg: cfg}
	switch cfg.Kind {
	case StatefulSet:
		k.s = cfg.Apps.StatefulSets(cfg.Namespace)
	case Deployment:
		k.s = cfg.Apps.Deployments(cfg.Namespace)
	default:
		return nil, fmt.Errorf("actuate: kubernetes: workload kind %q: want %q or %q", cfg.Kind, StatefulSet, Deployment)
	}
	k.log = cfg.Log.With().Str("component", "actuator").Str("actuator", "kubernetes").
		Str("workload", k.String()).Logger()
	return k, nil
}

// String names the workload, as kind namespace/name.
func (k *Kubernetes) String() string {
	return fmt.Sprintf("%s %s/%s", k.cfg.Kind, k.cfg.Namespace, k.cfg.Name)
}

// Size is the workload's spec.replicas.
func (k *Kubernetes) Size(ctx context.Context) (int, error) {
	s, err := k.s.GetScale(ctx, k.cfg.Name, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("actuate: kubernetes: %s: get scale: %w", k, err)
	}
	return int(s.Spec.Replicas), nil
}

// Resize sets the workload's spec.replicas to n. It reads the scale and
// writes it back with the version read, so a concurrent writer's change
// is never overwritten blindly: on a conflict it reads again and retries.
func (k *Kubernetes) Resize(ctx context.Context, n int) error {
	if n < 0 || n > math.MaxInt32 {
		return fmt.Errorf("actuate: kubernetes: %s: resize to %d replicas", k, n)
	}
	conflicts := 0
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := k.s.GetScale(ctx, k.cfg.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get scale: %w", err)
		}
		from := s.Spec.Replicas
		if from == int32(n) {
			return nil
		}
		s.Spec.Replicas = int32(n)
		if _, err := k.s.UpdateScale(ctx, k.cfg.Name, s, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsConflict(err) {
				conflicts++
				k.log.Debug().Err(err).Msg("scale changed meanwhile: reading it again")
				return err // unwrapped: RetryOnConflict retries a conflict
			}
			return fmt.Errorf("update scale: %w", err)
		}
		k.log.Info().Int32("from", from).Int("to", n).Msg("resize")
		return nil
	})
	switch {
	case err == nil:
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("actuate: kubernetes: %s: update scale: %d conflicts in a row: %w", k, conflicts, err)
	}
	return fmt.Errorf("actuate: kubernetes: %s: %w", k, err)
}
