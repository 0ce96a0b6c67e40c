package inspect

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Write prints the explanation for people, in one screen.
func (e *Explanation) Write(out io.Writer) {
	fmt.Fprintf(out, "%s\n", e.Target)
	if g := e.Gang; g != nil {
		fmt.Fprintf(out, "\nGANG %s/%s  %s  phase %s  minMember %d  placed %d/%d\n", g.Namespace, g.Name, g.Kind, orDash(g.Phase), g.MinMember, g.Placed, len(g.Members))
		if g.Topology != "" {
			fmt.Fprintf(out, "  topology %s\n", g.Topology)
		}
		for _, c := range g.Conditions {
			fmt.Fprintf(out, "  %s\n", c)
		}
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "  MEMBER\tSTATE\tREQUESTS\tNODE / WHY")
		for _, m := range g.Members {
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", m.Name, m.State, m.Requests, orDash(m.Why))
		}
		w.Flush()
	}
	if q := e.Queue; q != nil {
		fmt.Fprintf(out, "\nQUEUE %s  %s  state %s  weight %d  parent %s  gangs pending/inqueue/running %d/%d/%d\n",
			q.Name, q.Kind, q.State, q.Weight, orDash(q.Parent), q.Pending, q.Inqueue, q.Running)
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "  RESOURCE\tALLOCATED\tDESERVED\tCAPABILITY\tGUARANTEE\tSHARE")
		for _, r := range q.Resources {
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\t%s\n", r.Resource, r.Allocated, r.Deserved, r.Capability, r.Guarantee, r.Share)
		}
		w.Flush()
	}
	if len(e.Admission) > 0 {
		fmt.Fprintln(out, "\nADMISSION (what the gang still needs for its minimum against the queue)")
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "  RESOURCE\tNEEDS\tALLOCATED\tDESERVED\tCAPABILITY\tVERDICT")
		for _, a := range e.Admission {
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\t%s\n", a.Resource, a.Needs, a.Allocated, a.Deserved, a.Capability, a.Verdict)
		}
		w.Flush()
	}
	section(out, "NODES (the scheduler's verdicts, from the waiting members' PodScheduled condition)", e.Nodes)
	section(out, "TO START", e.ToStart)
	if e.Gang != nil {
		var lines []string
		for _, ev := range e.Evictions {
			lines = append(lines, fmt.Sprintf("%s %s: %s", ev.Reason, ev.Object, ev.Message))
		}
		if len(lines) == 0 {
			lines = []string{"none"}
		}
		section(out, "EVICTIONS (Events Reclaimed or Preempted on the gang or its members)", lines)
	}
	if len(e.Groups) > 0 {
		fmt.Fprintln(out, "\nGANGS")
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "  GANG\tKIND\tPHASE\tMIN")
		for _, g := range e.Groups {
			fmt.Fprintf(w, "  %s\t%s\t%s\t%d\n", g.Name, g.Kind, g.Phase, g.MinMember)
		}
		w.Flush()
	}
}

func section(out io.Writer, title string, lines []string) {
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(out, "\n%s\n  %s\n", title, strings.Join(lines, "\n  "))
}
