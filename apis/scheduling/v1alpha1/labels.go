package v1alpha1

// Labels and annotations through which pods join gangs and queues. A pod is
// managed by Muster when it belongs to a group (any source below) or names a
// queue; every other pod is scheduled exactly as the stock scheduler would.
const (
	// LabelPodGroup names the pod's group: a PodGroup of that name in the
	// pod's namespace, or a label-only group with LabelMinAvailable.
	LabelPodGroup = "muster.dev/pod-group"
	// LabelMinAvailable makes LabelPodGroup a label-only group of that size
	// when no PodGroup of the name exists.
	LabelMinAvailable = "muster.dev/min-available"
	// LabelQueue puts the pod (or its label-only group) in a queue.
	LabelQueue = "muster.dev/queue"
	// LabelRole is the pod's role within its group, for minTaskMember.
	LabelRole = "muster.dev/role"

	// LegacyLabelPodGroup and LegacyLabelMinAvailable are the labels of
	// scheduler-plugins' original coscheduling design; both are required.
	LegacyLabelPodGroup     = "pod-group.scheduling.sigs.k8s.io/name"
	LegacyLabelMinAvailable = "pod-group.scheduling.sigs.k8s.io/min-available"

	// SchedulerPluginsLabelPodGroup points a pod at a scheduler-plugins
	// PodGroup (scheduling.x-k8s.io/v1alpha1).
	SchedulerPluginsLabelPodGroup = "scheduling.x-k8s.io/pod-group"

	// VolcanoAnnotationTaskSpec is Volcano's role annotation, accepted in
	// place of LabelRole.
	VolcanoAnnotationTaskSpec = "volcano.sh/task-spec"

	// VolcanoAnnotationGroupName points a pod at a Volcano PodGroup
	// (scheduling.volcano.sh/v1beta1); VolcanoAnnotationGroupNameAlt is
	// the key Volcano also accepts, read when the first is absent.
	VolcanoAnnotationGroupName    = "scheduling.k8s.io/group-name"
	VolcanoAnnotationGroupNameAlt = "scheduling.volcano.sh/group-name"

	// VolcanoAnnotationQueueName names the queue of a pod in no group, as
	// Volcano reads it; LabelQueue wins where a pod carries both.
	VolcanoAnnotationQueueName = "scheduling.volcano.sh/queue-name"

	// AnnotationTopologyRequired and AnnotationTopologyPreferred give a
	// gang without a PodGroup field for it (label-only groups,
	// scheduler-plugins' PodGroups) its topology constraint: a node label
	// key. Required: every member in one domain of that key. Preferred:
	// the tightest level, from that key up, where the gang fits. Members
	// must agree.
	AnnotationTopologyRequired  = "muster.dev/topology-required"
	AnnotationTopologyPreferred = "muster.dev/topology-preferred"
)

// Topology levels of the default GangArgs, tightest first: host, rack,
// block, zone. Nodes carry LabelRack and LabelBlock where racks and blocks
// matter; the levels are set in the Gang plugin's args.
const (
	LabelRack  = "topology.muster.dev/rack"
	LabelBlock = "topology.muster.dev/block"
)
