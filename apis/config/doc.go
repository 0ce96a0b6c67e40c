// Package config holds the internal types of Muster's scheduler plugin
// arguments, registered into kube-scheduler's component-config scheme.
//
// +k8s:deepcopy-gen=package
// +groupName=kubescheduler.config.k8s.io
package config
