package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gpuprov.test/peers/internal/supervise"
)

func base64Std(data []byte) string { return base64.StdEncoding.EncodeToString(data) }

// controllers are the kube-controller-manager controllers the tests rely on (names of
// k8s.io/kubernetes cmd/kube-controller-manager/names): ServiceAccounts and their tokens (a pod
// needs its ServiceAccount), Namespaces and garbage collection (deletes cascade), the workload
// controllers that own the pods a drain evicts, the disruption controller (PodDisruptionBudget
// status, which the eviction API reads), the node lifecycle controller (Ready taints, from the
// node agent's heartbeats) and DRA's ResourceClaim controller. The rest (volumes, endpoints,
// certificates, HPA, ...) need a kubelet, a cloud or a network the tests do not have.
var controllers = []string{
	"serviceaccount-token-controller",
	"serviceaccount-controller",
	"namespace-controller",
	"garbage-collector-controller",
	"daemonset-controller",
	"deployment-controller",
	"replicaset-controller",
	"statefulset-controller",
	"job-controller",
	"disruption-controller",
	"pod-garbage-collector-controller",
	"node-lifecycle-controller",
	"taint-eviction-controller",
	"resourceclaim-controller",
	"root-ca-certificate-publisher-controller",
}

// freePort asks the kernel for a free loopback port. Another process may take it before the
// component binds it; the component then fails to start and says so in its log.
func freePort() (int, error) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer listener.Close()
	return listener.Addr().(*net.TCPAddr).Port, nil
}

// waitHTTP polls url until it answers 200, the component exits or the deadline passes.
func waitHTTP(client *http.Client, url string, c *supervise.Component, deadline time.Time) error {
	var last string
	for time.Now().Before(deadline) {
		if c != nil {
			select {
			case <-c.Done():
				return fmt.Errorf("%s before %s answered; its log ends:\n%s", c.DescribeExit(), url, c.Tail(25))
			default:
			}
		}
		response, err := client.Get(url)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(response.Body, 4096))
			response.Body.Close()
			if response.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %s", response.StatusCode, strings.TrimSpace(string(body)))
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	name := "?"
	if c != nil {
		name = c.Name
	}
	return fmt.Errorf("%s: %s did not answer 200 in time (last: %s); log: %s", name, url, last, func() string {
		if c != nil {
			return c.LogPath
		}
		return ""
	}())
}

type readyLine struct {
	Ready      bool               `json:"ready"`
	Server     string             `json:"server"`
	Kubeconfig string             `json:"kubeconfig"`
	CACert     string             `json:"ca_cert"`
	Dir        string             `json:"dir"`
	PID        int                `json:"pid"`
	Components map[string]int     `json:"pids"`
	Seconds    map[string]float64 `json:"seconds"`
	Version    string             `json:"version"`
}

func fail(format string, args ...any) int {
	_ = json.NewEncoder(os.Stdout).Encode(map[string]string{"error": fmt.Sprintf(format, args...)})
	return 1
}

func up(args []string) int {
	flags := flag.NewFlagSet("up", flag.ContinueOnError)
	dir := flags.String("dir", "", "folder for certificates, kubeconfigs, etcd data and logs (emptied first)")
	lifeline := flags.Bool("stdin-lifeline", false, "stop when standard input reaches EOF (the parent went away)")
	readyTimeout := flags.Float64("ready-timeout", 300, "seconds to wait for every component")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "controlplane up: --dir is required")
		return 2
	}
	started := time.Now()
	seconds := map[string]float64{}
	lap := func(name string, since time.Time) { seconds[name] = time.Since(since).Seconds() }
	deadline := started.Add(time.Duration(*readyTimeout * float64(time.Second)))

	root, err := filepath.Abs(*dir)
	if err != nil {
		return fail("%v", err)
	}
	for _, sub := range []string{"etcd", "pki", "logs"} {
		_ = os.RemoveAll(filepath.Join(root, sub))
		if err := os.MkdirAll(filepath.Join(root, sub), 0o700); err != nil {
			return fail("%v", err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return fail("%v", err)
	}
	pki := filepath.Join(root, "pki")

	// Certificates: one CA; serving certificates for the three secure ports; client
	// identities as kubeadm makes them (admin in system:masters; the controller manager and
	// the scheduler under the names the bootstrap RBAC policy binds).
	t := time.Now()
	ca, err := newCA()
	if err != nil {
		return fail("CA: %v", err)
	}
	caPath, _, err := ca.write(pki, "ca")
	if err != nil {
		return fail("%v", err)
	}
	hosts := []string{"127.0.0.1", "localhost", "10.96.0.1", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local"}
	identities := []struct {
		file, user string
		groups     []string
		hosts      []string
	}{
		{"apiserver", "kube-apiserver", nil, hosts},
		{"controller-manager-serving", "kube-controller-manager", nil, []string{"127.0.0.1", "localhost"}},
		{"scheduler-serving", "kube-scheduler", nil, []string{"127.0.0.1", "localhost"}},
		{"admin", "kubernetes-admin", []string{"system:masters"}, nil},
		{"controller-manager", "system:kube-controller-manager", nil, nil},
		{"scheduler", "system:kube-scheduler", nil, nil},
	}
	pairs := map[string]*keyPair{}
	for _, identity := range identities {
		pair, err := ca.sign(identity.user, identity.groups, identity.hosts)
		if err != nil {
			return fail("certificate %s: %v", identity.file, err)
		}
		if _, _, err := pair.write(pki, identity.file); err != nil {
			return fail("%v", err)
		}
		pairs[identity.file] = pair
	}
	saPrivate, saPublic, err := serviceAccountKey(pki)
	if err != nil {
		return fail("service account key: %v", err)
	}
	ports := map[string]int{}
	for _, name := range []string{"etcd-client", "etcd-peer", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if ports[name], err = freePort(); err != nil {
			return fail("free port: %v", err)
		}
	}
	server := "https://127.0.0.1:" + strconv.Itoa(ports["kube-apiserver"])
	kubeconfigs := map[string]string{}
	for file, user := range map[string]string{"admin": "kubernetes-admin", "controller-manager": "system:kube-controller-manager",
		"scheduler": "system:kube-scheduler"} {
		kubeconfigs[file] = filepath.Join(root, file+".kubeconfig")
		if err := writeKubeconfig(kubeconfigs[file], server, ca, user, pairs[file]); err != nil {
			return fail("%v", err)
		}
	}
	lap("certificates", t)

	t = time.Now()
	etcd, err := startEtcd(filepath.Join(root, "etcd"), filepath.Join(root, "logs", "etcd.log"), ports["etcd-client"], ports["etcd-peer"])
	if err != nil {
		return fail("etcd: %v", err)
	}
	defer etcd.Close()
	select {
	case <-etcd.Server.ReadyNotify():
	case <-time.After(time.Until(deadline)):
		return fail("etcd did not become ready; log: %s", filepath.Join(root, "logs", "etcd.log"))
	}
	lap("etcd", t)

	s := supervise.New(filepath.Join(root, "logs"), self)
	defer s.Stop(10 * time.Second)
	path := func(name string) string { return filepath.Join(pki, name) }

	// The flags of kubeadm's static pod manifests (cmd/kubeadm/app/phases/controlplane), less
	// the front proxy and the kubelet client: there is no aggregated API and no kubelet.
	t = time.Now()
	apiserver, err := s.Start("kube-apiserver",
		"--advertise-address=127.0.0.1",
		// The endpoints of the default/kubernetes Service may not be loopback addresses; no
		// pod reaches the API through that Service here (there is no pod network).
		"--endpoint-reconciler-type=none",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(ports["kube-apiserver"]),
		"--etcd-servers=http://127.0.0.1:"+strconv.Itoa(ports["etcd-client"]),
		"--allow-privileged=true",
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--client-ca-file="+caPath,
		"--tls-cert-file="+path("apiserver.crt"),
		"--tls-private-key-file="+path("apiserver.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+saPublic,
		"--service-account-signing-key-file="+saPrivate,
		"--service-cluster-ip-range=10.96.0.0/12",
		// As kubeadm sets it: the node proxy dials a node's InternalIP (a fake kubelet's API
		// on a non-loopback address; the proxy refuses loopback ones).
		"--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
		"--cert-dir="+filepath.Join(root, "pki", "apiserver-generated"),
		"--profiling=false",
		"--v=1",
	)
	if err != nil {
		return fail("%v", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	adminCert, err := tls.X509KeyPair(pairs["admin"].certPEM, pairs["admin"].keyPEM)
	if err != nil {
		return fail("%v", err)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{adminCert}}}}
	if err := waitHTTP(client, server+"/readyz", apiserver, deadline); err != nil {
		return fail("%v", err)
	}
	lap("kube-apiserver", t)

	t = time.Now()
	controllerManager, err := s.Start("kube-controller-manager",
		"--kubeconfig="+kubeconfigs["controller-manager"],
		"--authentication-kubeconfig="+kubeconfigs["controller-manager"],
		"--authorization-kubeconfig="+kubeconfigs["controller-manager"],
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(ports["kube-controller-manager"]),
		"--tls-cert-file="+path("controller-manager-serving.crt"),
		"--tls-private-key-file="+path("controller-manager-serving.key"),
		"--client-ca-file="+caPath,
		"--controllers="+strings.Join(controllers, ","),
		"--leader-elect=false",
		"--root-ca-file="+caPath,
		"--service-account-private-key-file="+saPrivate,
		"--use-service-account-credentials=true",
		"--profiling=false",
		"--v=1",
	)
	if err != nil {
		return fail("%v", err)
	}
	scheduler, err := s.Start("kube-scheduler",
		"--kubeconfig="+kubeconfigs["scheduler"],
		"--authentication-kubeconfig="+kubeconfigs["scheduler"],
		"--authorization-kubeconfig="+kubeconfigs["scheduler"],
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(ports["kube-scheduler"]),
		"--tls-cert-file="+path("scheduler-serving.crt"),
		"--tls-private-key-file="+path("scheduler-serving.key"),
		"--client-ca-file="+caPath,
		"--leader-elect=false",
		"--profiling=false",
		"--v=1",
	)
	if err != nil {
		return fail("%v", err)
	}
	if err := waitHTTP(client, "https://127.0.0.1:"+strconv.Itoa(ports["kube-controller-manager"])+"/healthz", controllerManager, deadline); err != nil {
		return fail("%v", err)
	}
	// Pods are admitted only once their namespace has its ServiceAccount.
	if err := waitHTTP(client, server+"/api/v1/namespaces/default/serviceaccounts/default", controllerManager, deadline); err != nil {
		return fail("%v", err)
	}
	lap("kube-controller-manager", t)
	if err := waitHTTP(client, "https://127.0.0.1:"+strconv.Itoa(ports["kube-scheduler"])+"/readyz", scheduler, deadline); err != nil {
		return fail("%v", err)
	}
	lap("kube-scheduler", t)
	seconds["total"] = time.Since(started).Seconds()

	version := ""
	if response, err := client.Get(server + "/version"); err == nil {
		var info struct {
			GitVersion string `json:"gitVersion"`
		}
		_ = json.NewDecoder(response.Body).Decode(&info)
		response.Body.Close()
		version = info.GitVersion
	}
	pids := map[string]int{}
	for _, c := range []*supervise.Component{apiserver, controllerManager, scheduler} {
		pids[c.Name] = c.PID()
	}
	line := readyLine{Ready: true, Server: server, Kubeconfig: kubeconfigs["admin"], CACert: caPath, Dir: root,
		PID: os.Getpid(), Components: pids, Seconds: seconds, Version: version}
	data, _ := json.Marshal(line)
	if err := os.WriteFile(filepath.Join(root, "ready.json"), append(data, '\n'), 0o644); err != nil {
		return fail("%v", err)
	}
	fmt.Println(string(data))
	os.Stdout.Sync()

	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	eof := make(chan struct{})
	if *lifeline {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			close(eof)
		}()
	}
	select {
	case <-signals:
	case <-eof:
	case c := <-s.Failed():
		fmt.Fprintf(os.Stderr, "controlplane: %s; its log ends:\n%s\n", c.DescribeExit(), c.Tail(25))
		_ = os.Remove(filepath.Join(root, "ready.json"))
		return 1
	}
	_ = os.Remove(filepath.Join(root, "ready.json"))
	return 0
}
