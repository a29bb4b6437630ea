// Package supervise runs the test control plane's components (kube-apiserver,
// kube-controller-manager, kube-scheduler) as child processes and restarts one that exits.
//
// Like the kubelet with kubeadm's static pods (restartPolicy Always), the supervisor starts a
// component again when it exits: a kube-controller-manager that gives up waiting for a loaded
// API server (its 10 s WaitForAPIServer, k8s.io/kubernetes v1.37.2
// cmd/kube-controller-manager/app/controllermanager.go) comes back as it would in a cluster.
// The kubelet's back-off starts at 10 s and never gives up; here it starts at FirstDelay and
// gives up after MaxRestarts, so a component that cannot run fails the start with its log
// instead of looping.
package supervise

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Component is one supervised program: its current process, its log and its restarts.
type Component struct {
	Name    string
	LogPath string
	args    []string
	// done is closed when the component is down for good: stopped, or out of restarts.
	done chan struct{}

	mu       sync.Mutex
	cmd      *exec.Cmd
	err      error // how the last process ended
	restarts int
}

// Done is closed once the component is down for good (stopped, or out of restarts).
func (c *Component) Done() <-chan struct{} { return c.done }

// PID is the process id of the component's current process.
func (c *Component) PID() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cmd.Process.Pid
}

// Restarts is how many times the component was started again.
func (c *Component) Restarts() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.restarts
}

func (c *Component) lines() []string {
	data, err := os.ReadFile(c.LogPath)
	if err != nil || len(data) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(data), "\n"), "\n")
}

// Tail is the last n lines of the component's log.
func (c *Component) Tail(n int) string {
	all := c.lines()
	if len(all) > n {
		all = all[len(all)-n:]
	}
	return strings.Join(all, "\n")
}

// LastError is the last klog error or fatal line of the log ("E1207 ..." / "F1207 ..."), else
// its last line: the cause, for the one-line summaries test runners print.
func (c *Component) LastError() string {
	all := c.lines()
	for i := len(all) - 1; i >= 0; i-- {
		line := all[i]
		if len(line) > 5 && (line[0] == 'E' || line[0] == 'F') && line[1] >= '0' && line[1] <= '9' {
			return strings.TrimSpace(line)
		}
	}
	if len(all) == 0 {
		return "(empty log)"
	}
	return strings.TrimSpace(all[len(all)-1])
}

// DescribeExit says how the component ended, with the cause on the same line.
func (c *Component) DescribeExit() string {
	c.mu.Lock()
	err, restarts := c.err, c.restarts
	c.mu.Unlock()
	return fmt.Sprintf("%s exited (%v; started %d times; last error in its log: %s)", c.Name, err, restarts+1, c.LastError())
}

// Supervisor starts components as `Program NAME ARGS...`, each logging to LogDir/NAME.log.
type Supervisor struct {
	LogDir      string
	Program     string
	MaxRestarts int
	FirstDelay  time.Duration // doubled after each restart

	mu         sync.Mutex
	components []*Component
	stopping   bool
	stopped    chan struct{}
	failed     chan *Component
}

// New is a supervisor with the control plane's defaults: 5 restarts, 1 s first back-off.
func New(logDir, program string) *Supervisor {
	return &Supervisor{LogDir: logDir, Program: program, MaxRestarts: 5, FirstDelay: time.Second,
		stopped: make(chan struct{}), failed: make(chan *Component, 16)}
}

// Failed receives each component that is out of restarts (or could not be started again).
func (s *Supervisor) Failed() <-chan *Component { return s.failed }

// Start runs NAME, its log truncated, and restarts it whenever it exits until Stop.
func (s *Supervisor) Start(name string, args ...string) (*Component, error) {
	c := &Component{Name: name, LogPath: filepath.Join(s.LogDir, name+".log"), args: args, done: make(chan struct{})}
	if err := s.launch(c, os.O_TRUNC); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.components = append(s.components, c)
	s.mu.Unlock()
	return c, nil
}

func (s *Supervisor) isStopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopping
}

// launch starts one process of c, its output added to c's log, and watches it.
func (s *Supervisor) launch(c *Component, mode int) error {
	logFile, err := os.OpenFile(c.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND|mode, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.Program, append([]string{c.Name}, c.args...)...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// The component dies with its supervisor, even when that is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		logFile.Close()
		return fmt.Errorf("%s: the supervisor is stopping", c.Name)
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("%s: %w", c.Name, err)
	}
	c.mu.Lock()
	c.cmd = cmd
	c.mu.Unlock()
	go s.watch(c, cmd, logFile)
	return nil
}

// watch waits for one process of c and starts the next after a back-off, unless the
// supervisor is stopping or c is out of restarts.
func (s *Supervisor) watch(c *Component, cmd *exec.Cmd, logFile *os.File) {
	err := cmd.Wait()
	c.mu.Lock()
	c.err = err
	restarts := c.restarts
	c.mu.Unlock()
	if s.isStopping() {
		logFile.Close()
		close(c.done)
		return
	}
	if restarts >= s.MaxRestarts {
		logFile.Close()
		close(c.done)
		s.failed <- c
		return
	}
	delay := s.FirstDelay << restarts
	note := fmt.Sprintf("supervise: %s exited (%v); starting it again in %s (restart %d of %d)", c.Name, err, delay,
		restarts+1, s.MaxRestarts)
	fmt.Fprintln(logFile, note)
	logFile.Close()
	fmt.Fprintln(os.Stderr, note)
	select {
	case <-s.stopped:
		close(c.done)
		return
	case <-time.After(delay):
	}
	c.mu.Lock()
	c.restarts++
	c.mu.Unlock()
	if err := s.launch(c, 0); err != nil {
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
		close(c.done)
		if !s.isStopping() {
			s.failed <- c
		}
	}
}

// Stop ends the components in reverse start order: SIGTERM, then SIGKILL after grace.
func (s *Supervisor) Stop(grace time.Duration) {
	s.mu.Lock()
	if !s.stopping {
		s.stopping = true
		close(s.stopped)
	}
	components := append([]*Component(nil), s.components...)
	s.mu.Unlock()
	for i := len(components) - 1; i >= 0; i-- {
		c := components[i]
		select {
		case <-c.done:
			continue
		default:
		}
		c.mu.Lock()
		process := c.cmd.Process
		c.mu.Unlock()
		_ = process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(grace):
			_ = process.Kill()
			<-c.done
		}
	}
}
