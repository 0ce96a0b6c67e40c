package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/muster-sched/muster/pkg/inspect"
)

func newTopCommand() *cobra.Command {
	var (
		kube     kubeFlags
		output   string
		watch    bool
		interval time.Duration
	)
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Show the queues as a tree: allocated/deserved/capability per resource, share, gangs",
		Long: `Reads every Muster and Volcano Queue and prints them as a tree (children under
their parent) with, for cpu, memory and every extended resource a queue has,
allocated/deserved/capability in one column ("-": unset, unlimited), the
dominant share (the largest allocated/deserved), and the queue's pending,
inqueue and running gangs, all from Queue.status as the scheduler writes it.`,
		Example: `  muster top
  muster top -o wide --watch --interval 5s
  muster top -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, "wide", "json", "yaml"); err != nil {
				return err
			}
			if watch && interval <= 0 {
				return fmt.Errorf("--interval must be positive, not %v", interval)
			}
			c, _, err := kube.clients()
			if err != nil {
				return err
			}
			ctx, out := cmd.Context(), cmd.OutOrStdout()
			if !watch {
				return top(ctx, c, out, output)
			}
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for {
				if output == "" || output == "wide" {
					fmt.Fprint(out, "\033[H\033[2J") // clear the terminal
				}
				if err := top(ctx, c, out, output); err != nil {
					return err
				}
				select {
				case <-ctx.Done():
					return nil
				case <-tick.C:
				}
			}
		},
	}
	kube.bind(cmd)
	f := cmd.Flags()
	f.StringVarP(&output, "output", "o", "", "output format: wide, json or yaml (default: table)")
	f.BoolVarP(&watch, "watch", "w", false, "refresh every --interval until interrupted")
	f.DurationVar(&interval, "interval", 2*time.Second, "how often --watch refreshes")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"wide", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func top(ctx context.Context, c inspect.Clients, out io.Writer, output string) error {
	rows, err := inspect.Top(ctx, c)
	if err != nil {
		return err
	}
	if done, err := printStructured(out, output, rows); done {
		return err
	}
	inspect.WriteTop(out, rows, output == "wide")
	return nil
}
