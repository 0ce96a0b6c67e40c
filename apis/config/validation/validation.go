// Package validation checks Muster's plugin arguments at scheduler start-up.
package validation

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/muster-sched/muster/apis/config"
)

// Weights of a resource in a score plugin, as kube-scheduler allows them.
const (
	minResourceWeight = 1
	maxResourceWeight = 100
)

// ValidateBinpackArgs checks that every resource is named once, is a valid
// resource name, and has a weight in [1, 100], and that the domain levels
// are valid label keys, each named once.
func ValidateBinpackArgs(path *field.Path, args *config.BinpackArgs) error {
	errs := validateResources(args.Resources, path.Child("resources"))
	errs = append(errs, validateLabelKeys(args.DomainLevels, path.Child("domainLevels"))...)
	return errs.ToAggregate()
}

// validateLabelKeys checks that every key is a valid node label key, named
// once.
func validateLabelKeys(keys []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, k := range keys {
		p := path.Index(i)
		if msgs := utilvalidation.IsQualifiedName(k); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p, k, strings.Join(msgs, "; ")))
		} else if seen.Has(k) {
			errs = append(errs, field.Duplicate(p, k))
		}
		seen.Insert(k)
	}
	return errs
}

// ValidateGangArgs checks that the default timeout and the plan step are
// positive and the topology levels valid label keys, each named once.
func ValidateGangArgs(path *field.Path, args *config.GangArgs) error {
	var errs field.ErrorList
	if args.DefaultScheduleTimeoutSeconds < 1 {
		errs = append(errs, field.Invalid(path.Child("defaultScheduleTimeoutSeconds"), args.DefaultScheduleTimeoutSeconds, "must be at least 1"))
	}
	if args.PlanStepMilliseconds < 1 {
		errs = append(errs, field.Invalid(path.Child("planStepMilliseconds"), args.PlanStepMilliseconds, "must be at least 1"))
	}
	errs = append(errs, validateLabelKeys(args.TopologyLevels, path.Child("topologyLevels"))...)
	return errs.ToAggregate()
}

// MaxOvercommitFactor bounds the overcommit factor: beyond it admission
// would no longer limit anything, and factor × allocatable could overflow.
const MaxOvercommitFactor = 100

// ValidateOvercommitFactor checks a queue policy's overcommit factor.
func ValidateOvercommitFactor(path *field.Path, factor float64) error {
	if !(factor >= 1 && factor <= MaxOvercommitFactor) { // NaN too
		return field.ErrorList{field.Invalid(path.Child("overcommitFactor"), factor, fmt.Sprintf("must be between 1 and %d", MaxOvercommitFactor))}.ToAggregate()
	}
	return nil
}

// ValidateAuditInterval checks a queue policy's audit interval.
func ValidateAuditInterval(path *field.Path, seconds int64) error {
	if seconds < 0 {
		return field.ErrorList{field.Invalid(path.Child("auditIntervalSeconds"), seconds, "must not be negative (0 turns the audit off)")}.ToAggregate()
	}
	return nil
}

func validateResources(resources []schedconfig.ResourceSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(resources) == 0 {
		errs = append(errs, field.Required(path, "at least one resource must be scored"))
	}
	seen := sets.New[string]()
	for i, r := range resources {
		p := path.Index(i)
		if r.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), "resource name is required"))
		} else if seen.Has(r.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), r.Name))
		} else if msgs := utilvalidation.IsQualifiedName(r.Name); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p.Child("name"), r.Name, strings.Join(msgs, "; ")))
		}
		seen.Insert(r.Name)
		if r.Weight < minResourceWeight || r.Weight > maxResourceWeight {
			errs = append(errs, field.Invalid(p.Child("weight"), r.Weight, "must be in the range [1, 100]"))
		}
	}
	return errs
}
