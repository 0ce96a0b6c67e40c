package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"sort"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/muster-sched/muster/pkg/controlplane"
	"github.com/muster-sched/muster/pkg/scenario"
)

func newBenchCommand() *cobra.Command {
	var (
		asJSON         bool
		withSeries     bool
		outDir         string
		profiles       []string
		verbosity      int
		cpuProfile     string
		mutexProfile   string
		windowProfiles string
		allocProfile   string
		traceFile      string
		runs           int
	)
	cmd := &cobra.Command{
		Use:   "bench SCENARIO|DIR...",
		Short: "Run scenarios once per scheduler profile and compare them side by side",
		Long: `Runs each scenario file (a cluster, queues, a timeline of gangs and pods) once
per scheduler profile — the stock kube-scheduler, kube-scheduler with
Kubernetes' own gang API on (upstream), scheduler-plugins' Coscheduling and
CapacityScheduling (the muster-comparator binary), and Muster — each on a
fresh in-process control plane with simulated nodes and kubelet, and prints
the metrics side by
side: makespan, throughput, scheduling attempts, gang latency, partial gangs,
wasted reservations, utilization, fairness, packing and evictions.

A scenario's expectations (expect:) are checked: the command fails, naming
each bound, when one does not hold. docs/scenarios.md is the file reference.`,
		Example: `  muster bench test/scenarios/demo.yaml
  muster bench --out _output/bench test/scenarios
  muster bench --json --profiles stock,muster test/scenarios/contention.yaml`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			controlplane.Logs(verbosity)
			files, err := scenarioFiles(args)
			if err != nil {
				return err
			}
			var scenarios []*scenario.Scenario
			for _, f := range files {
				s, err := scenario.Load(f)
				if err != nil {
					return err
				}
				scenarios = append(scenarios, s)
			}
			if cpuProfile != "" && windowProfiles != "" {
				return fmt.Errorf("--cpuprofile and --window-cpuprofiles both profile the CPU: use one")
			}
			// Recorders that write to a file from start to stop.
			for _, rec := range []struct {
				file  string
				start func(io.Writer) error
				stop  func()
			}{{cpuProfile, pprof.StartCPUProfile, pprof.StopCPUProfile}, {traceFile, trace.Start, trace.Stop}} {
				if rec.file == "" {
					continue
				}
				f, err := os.Create(rec.file)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := rec.start(f); err != nil {
					return err
				}
				defer rec.stop()
			}
			if mutexProfile != "" {
				runtime.SetMutexProfileFraction(10)
				defer func() {
					if err := writeProfile("mutex", mutexProfile); err != nil {
						fmt.Fprintln(cmd.ErrOrStderr(), err)
					}
				}()
			}
			if allocProfile != "" {
				defer func() {
					if err := writeProfile("allocs", allocProfile); err != nil {
						fmt.Fprintln(cmd.ErrOrStderr(), err)
					}
				}()
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			out := cmd.OutOrStdout()
			opts := scenario.Options{Profiles: profiles, Progress: os.Stderr, Interactive: isTerminal(os.Stderr), Runs: runs}
			var reports []*scenario.Report
			var failures []string
			for _, s := range scenarios {
				if windowProfiles != "" {
					opts.Window = windowCPUProfile(windowProfiles, s.Name, cmd.ErrOrStderr())
				}
				results, err := scenario.Run(ctx, s, opts)
				if err != nil {
					return err
				}
				failures = append(failures, scenario.Check(s, results)...)
				rep := scenario.NewReport(s, results)
				reports = append(reports, rep)
				if !asJSON {
					scenario.WriteTable(out, rep)
				}
				if outDir != "" {
					if err := writeSVG(outDir, rep); err != nil {
						return err
					}
				}
			}
			if asJSON {
				if err := scenario.WriteJSON(out, reports, withSeries); err != nil {
					return err
				}
			}
			if outDir != "" {
				if err := writeJSONFile(filepath.Join(outDir, "results.json"), reports); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "Pictures and results.json are in %s\n", outDir)
			}
			if len(failures) > 0 {
				return fmt.Errorf("%d bound(s) failed:\n  %s", len(failures), strings.Join(failures, "\n  "))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print the results as JSON (field names in docs/scenarios.md) instead of tables")
	f.BoolVar(&withSeries, "series", false, "with --json, include the sampled utilization and share series")
	f.StringVar(&outDir, "out", "", "write a picture of utilization and queue shares over time per scenario (<name>.svg) and results.json (with series) into this folder")
	f.StringSliceVar(&profiles, "profiles", nil, "profiles to run instead of each scenario's list ("+strings.Join(scenario.Profiles, ", ")+")")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole process (control plane, scheduler, runner) to this file")
	f.StringVar(&windowProfiles, "window-cpuprofiles", "", "write a CPU profile of each run's measured window alone (scheduler start to the run's end) into this folder, as <scenario>-<profile>-<run>.pprof; go tool pprof merges several")
	f.StringVar(&allocProfile, "allocprofile", "", "write a profile of the memory allocated by the whole process (go tool pprof -sample_index=alloc_space) to this file")
	f.StringVar(&mutexProfile, "mutexprofile", "", "write a profile of contended locks (1 in 10 sampled) of the whole process to this file")
	f.StringVar(&traceFile, "trace", "", "write an execution trace of the whole process to this file (go tool trace): where the scheduler's goroutines wait")
	f.IntVar(&runs, "runs", 0, "run each profile this many times, the profiles taking turns, and report medians (default: the scenario's runs, else 1)")
	f.IntVarP(&verbosity, "v", "v", 0, "log verbosity of the control plane and scheduler (0: no logs)")
	return cmd
}

// windowCPUProfile returns a scenario.Options.Window that profiles the CPU
// of each run's window into dir; a failure to profile is reported on
// errOut and does not stop the run.
func windowCPUProfile(dir, scenarioName string, errOut io.Writer) func(profile string, run int) func() {
	return func(profile string, run int) func() {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fmt.Fprintln(errOut, err)
			return func() {}
		}
		name := strings.ReplaceAll(fmt.Sprintf("%s-%s-%d.pprof", scenarioName, profile, run), string(filepath.Separator), "_")
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			fmt.Fprintln(errOut, err)
			return func() {}
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(errOut, err)
			f.Close()
			return func() {}
		}
		return func() {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				fmt.Fprintln(errOut, err)
			}
		}
	}
}

// writeProfile writes the named runtime profile to file.
func writeProfile(name, file string) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// scenarioFiles expands folders into their *.yaml files, in name order.
func scenarioFiles(args []string) ([]string, error) {
	var files []string
	for _, a := range args {
		info, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			files = append(files, a)
			continue
		}
		matches, err := filepath.Glob(filepath.Join(a, "*.yaml"))
		if err != nil {
			return nil, err
		}
		sort.Strings(matches)
		files = append(files, matches...)
	}
	return files, nil
}

func writeSVG(dir string, rep *scenario.Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, rep.Scenario+".svg"))
	if err != nil {
		return err
	}
	if err := scenario.WriteSVG(f, rep); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func writeJSONFile(file string, reports []*scenario.Report) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := scenario.WriteJSON(f, reports, true); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func isTerminal(f *os.File) bool {
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
