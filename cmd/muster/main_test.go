package main

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestMain runs the command itself when the test binary is started as
// muster (MUSTER_TEST_MAIN=1): tests run the CLI in a child process so
// that they see everything it writes to stdout and stderr, the etcd
// client's own stderr writer included.
func TestMain(m *testing.M) {
	if os.Getenv("MUSTER_TEST_MAIN") == "1" {
		os.Args = append([]string{"muster"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// muster runs the CLI with args and returns its stdout and stderr.
func muster(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "MUSTER_TEST_MAIN=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("muster %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.String(), errOut.String()
}

// logLine matches what the control plane would leak: klog's header
// (I1126 23:04:16.123456 …) or a zap JSON line (the etcd client's).
var logLine = regexp.MustCompile(`(?m)^([IWEF]\d{4} \d\d:\d\d:\d\d|\{"level":)|etcd-client|retrying of unary invoker`)

func TestNoControlPlaneLogsAtVerbosityZero(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	for _, tc := range []struct {
		name     string
		args     []string
		wantHead string
	}{
		{"sandbox", []string{"sandbox", "--settle", "1s", "../../examples"}, "Muster sandbox: "},
		{"bench", []string{"bench", "--profiles", "muster", "../../test/scenarios/demo.yaml"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr := muster(t, tc.args...)
			if !strings.HasPrefix(stdout, tc.wantHead) {
				t.Errorf("stdout does not start with %q:\n%s", tc.wantHead, stdout)
			}
			for name, s := range map[string]string{"stdout": stdout, "stderr": stderr} {
				if m := logLine.FindString(s); m != "" {
					t.Errorf("%s carries a log line (%q):\n%s", name, m, s)
				}
			}
		})
	}
}

func TestVersion(t *testing.T) {
	stdout, _ := muster(t, "--version")
	if !regexp.MustCompile(`^muster \S+ \(Kubernetes v1\.\d+\.\d+\)\n$`).MatchString(stdout) {
		t.Errorf("muster --version = %q, want muster VERSION (Kubernetes v1.x.y)", stdout)
	}
}

func TestOutputFormatsAreChecked(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"explain", "pod", "x", "-o", "wide"}, "-o wide: the formats are json, yaml"},
		{[]string{"top", "-o", "name"}, "-o name: the formats are wide, json, yaml"},
		{[]string{"top", "--watch", "--interval", "0"}, "--interval must be positive, not 0s"},
	} {
		cmd := newCommand()
		cmd.SetArgs(tc.args)
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		if err := cmd.Execute(); err == nil || err.Error() != tc.want {
			t.Errorf("muster %s: error %v, want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

func TestCompletion(t *testing.T) {
	stdout, _ := muster(t, "completion", "bash")
	if !strings.Contains(stdout, "bash completion") {
		t.Errorf("muster completion bash printed no bash completion script:\n%.200s", stdout)
	}
}
