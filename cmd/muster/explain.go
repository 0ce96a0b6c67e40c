package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/muster-sched/muster/pkg/inspect"
)

func newExplainCommand() *cobra.Command {
	var (
		kube   kubeFlags
		output string
	)
	cmd := &cobra.Command{
		Use:   "explain (pod|podgroup|queue) NAME",
		Short: "Say why a pod, gang or queue waits: members, queue arithmetic, nodes' verdicts, evictions",
		Long: `Reads the cluster (never writes to it) and says, in one screen, where a gang's
members stand, the queue's figures and the admission arithmetic, the nodes'
verdicts, what would have to free for the gang to start, and the evictions
that touched it.

The nodes' verdicts are the scheduler's own: the "0/N nodes are available: …"
message it writes in each waiting pod's PodScheduled condition, and the
conditions it writes on the PodGroup. Nothing is scheduled again.

A podgroup NAME is looked up among Muster's PodGroups, then
scheduler-plugins', Volcano's and Kubernetes' (scheduling.k8s.io); a label-only
gang is found by its members. A queue is a Muster Queue, else a Volcano Queue.`,
		Example: `  muster explain pod train-0 -n team-a
  muster explain podgroup train -n team-a -o yaml
  muster explain queue team-a`,
		Args: cobra.ExactArgs(2),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			switch len(args) {
			case 0:
				return []string{"pod", "podgroup", "queue"}, cobra.ShellCompDirectiveNoFileComp
			case 1:
				c, ns, err := kube.clients()
				if err != nil {
					return nil, cobra.ShellCompDirectiveError
				}
				names, err := inspect.Names(cmd.Context(), c, strings.ToLower(args[0]), ns)
				if err != nil {
					return nil, cobra.ShellCompDirectiveError
				}
				return names, cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, "json", "yaml"); err != nil {
				return err
			}
			c, ns, err := kube.clients()
			if err != nil {
				return err
			}
			e, err := inspect.Explain(cmd.Context(), c, strings.ToLower(args[0]), ns, args[1])
			if err != nil {
				return err
			}
			if done, err := printStructured(cmd.OutOrStdout(), output, e); done {
				return err
			}
			e.Write(cmd.OutOrStdout())
			return nil
		},
	}
	kube.bind(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml (default: text)")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// checkOutput refuses an -o format the command does not print.
func checkOutput(format string, allowed ...string) error {
	if format == "" {
		return nil
	}
	for _, a := range allowed {
		if format == a {
			return nil
		}
	}
	return fmt.Errorf("-o %s: the formats are %s", format, strings.Join(allowed, ", "))
}
