package supervise

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// program writes a shell script the supervisor runs as `script NAME`: it fails while the
// count file holds fewer than failures starts, then sleeps as a healthy component would.
func program(t *testing.T, failures int) (string, string) {
	t.Helper()
	dir := t.TempDir()
	count := filepath.Join(dir, "starts")
	script := filepath.Join(dir, "component")
	body := "#!/bin/sh\n" +
		"echo start >> " + count + "\n" +
		"n=$(wc -l < " + count + ")\n" +
		"if [ \"$n\" -le " + strconv.Itoa(failures) + " ]; then\n" +
		"  echo 'I1207 00:00:00.000000 1 app.go:1] starting'\n" +
		"  echo 'E1207 00:00:01.000000 1 app.go:2] failed to wait for apiserver being healthy' >&2\n" +
		"  echo 'I1207 00:00:01.000001 1 app.go:3] shutting down'\n" +
		"  exit 1\n" +
		"fi\n" +
		"exec sleep 60\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script, count
}

func starts(t *testing.T, count string) int {
	t.Helper()
	data, err := os.ReadFile(count)
	if err != nil {
		return 0
	}
	return strings.Count(string(data), "start")
}

func newForTest(t *testing.T, script string) *Supervisor {
	s := New(t.TempDir(), script)
	s.FirstDelay = 10 * time.Millisecond
	t.Cleanup(func() { s.Stop(5 * time.Second) })
	return s
}

func TestAComponentThatExitsIsStartedAgainAndKeepsRunning(t *testing.T) {
	script, count := program(t, 2)
	s := newForTest(t, script)
	c, err := s.Start("kube-controller-manager", "--v=1")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for starts(t, count) < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := starts(t, count); got != 3 {
		t.Fatalf("started %d times, want 3 (two failures, then a healthy run)", got)
	}
	time.Sleep(200 * time.Millisecond)
	select {
	case <-c.Done():
		t.Fatalf("the component is down for good after it came back: %s", c.DescribeExit())
	case failed := <-s.Failed():
		t.Fatalf("%s reported failed after it came back", failed.Name)
	default:
	}
	if c.Restarts() != 2 {
		t.Fatalf("restarts = %d, want 2", c.Restarts())
	}
	log := c.Tail(100)
	// Both failed runs' output stays in the log, each followed by the supervisor's note.
	if strings.Count(log, "failed to wait for apiserver") != 2 || strings.Count(log, "starting it again") != 2 {
		t.Fatalf("log does not keep both failed runs and the restarts:\n%s", log)
	}
}

func TestAComponentThatNeverRunsFailsWithItsErrorOnTheFirstLine(t *testing.T) {
	script, count := program(t, 9)
	s := newForTest(t, script)
	s.MaxRestarts = 3
	c, err := s.Start("kube-controller-manager")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case failed := <-s.Failed():
		if failed != c {
			t.Fatalf("failed component %s, want %s", failed.Name, c.Name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the component was never reported failed")
	}
	<-c.Done()
	if got := starts(t, count); got != 4 {
		t.Fatalf("started %d times, want 4 (the first start and 3 restarts)", got)
	}
	first := strings.SplitN(c.DescribeExit(), "\n", 2)[0]
	for _, want := range []string{"kube-controller-manager exited (exit status 1", "started 4 times",
		"E1207 00:00:01.000000 1 app.go:2] failed to wait for apiserver being healthy"} {
		if !strings.Contains(first, want) {
			t.Fatalf("first line %q lacks %q", first, want)
		}
	}
}

func TestStopDuringTheBackOffEndsTheComponentWithoutAnotherStart(t *testing.T) {
	script, count := program(t, 9)
	s := New(t.TempDir(), script)
	s.FirstDelay = time.Minute
	c, err := s.Start("kube-scheduler")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(c.Tail(5), "starting it again") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	stopped := make(chan struct{})
	go func() { s.Stop(5 * time.Second); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop waited out the back-off")
	}
	<-c.Done()
	if got := starts(t, count); got != 1 {
		t.Fatalf("started %d times, want 1", got)
	}
	select {
	case failed := <-s.Failed():
		t.Fatalf("%s reported failed on a stop", failed.Name)
	default:
	}
}

func TestStopEndsARunningComponent(t *testing.T) {
	script, _ := program(t, 0)
	s := New(t.TempDir(), script)
	c, err := s.Start("kube-apiserver")
	if err != nil {
		t.Fatal(err)
	}
	pid := c.PID()
	s.Stop(5 * time.Second)
	<-c.Done()
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("process %d still runs after Stop", pid)
	}
}
