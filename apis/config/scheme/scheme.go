// Package scheme registers Muster's plugin arguments into kube-scheduler's
// component-config scheme, so that a KubeSchedulerConfiguration naming them
// is decoded (strictly), defaulted and converted by kube-scheduler itself.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kubeschedulerscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"

	"github.com/muster-sched/muster/apis/config"
	configv1 "github.com/muster-sched/muster/apis/config/v1"
)

// Scheme is kube-scheduler's own config scheme, with Muster's args added.
var Scheme = kubeschedulerscheme.Scheme

func init() {
	AddToScheme(Scheme)
}

// AddToScheme adds every version of Muster's args to scheme.
func AddToScheme(scheme *runtime.Scheme) {
	utilruntime.Must(config.AddToScheme(scheme))
	utilruntime.Must(configv1.AddToScheme(scheme))
}
