package main

import (
	"net/url"
	"strconv"

	"go.etcd.io/etcd/server/v3/embed"
)

// startEtcd runs etcd inside this process, on loopback without TLS (only this machine's
// processes reach it; kubeadm's etcd has its own CA, which the tests do not need). Kubernetes
// 1.37 requires etcd 3.5.x or newer; k8s.io/kubernetes v1.37.2's go.mod requires
// go.etcd.io/etcd/server/v3 v3.7.0, which this is.
func startEtcd(dataDir, logPath string, clientPort, peerPort int) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = "gpuprov-test"
	cfg.Dir = dataDir
	clientURL := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(clientPort)}
	peerURL := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(peerPort)}
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{logPath}
	// A test cluster's data is thrown away with it: no fsync saves seconds per test on slow disks.
	cfg.UnsafeNoFsync = true
	return embed.StartEtcd(cfg)
}
