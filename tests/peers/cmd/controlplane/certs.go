package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// keyPair is a certificate with its private key, PEM-encoded as the components read them.
type keyPair struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	keyPEM  []byte
}

func newKey() (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
}

// newCA makes the cluster's one certificate authority (kubeadm has one for the API, one for
// etcd and one for the front proxy; the tests need only the first: etcd listens on loopback).
func newCA() (*keyPair, error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, err
	}
	number, err := serial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber:          number,
		Subject:               pkix.Name{CommonName: "gpuprov-test-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM: keyPEM}, nil
}

// sign issues a leaf certificate: a client identity (CN is the user, O the groups, as the
// API server's x509 authenticator reads them) or, with hosts, a serving certificate.
func (ca *keyPair) sign(commonName string, groups []string, hosts []string) (*keyPair, error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, err
	}
	number, err := serial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber: number,
		Subject:      pkix.Name{CommonName: commonName, Organization: groups},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(10 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if len(hosts) > 0 {
		template.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		for _, host := range hosts {
			if ip := net.ParseIP(host); ip != nil {
				template.IPAddresses = append(template.IPAddresses, ip)
			} else {
				template.DNSNames = append(template.DNSNames, host)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM: keyPEM}, nil
}

// write puts NAME.crt and NAME.key into dir (the key readable by its owner only).
func (kp *keyPair) write(dir, name string) (certPath, keyPath string, err error) {
	certPath = filepath.Join(dir, name+".crt")
	keyPath = filepath.Join(dir, name+".key")
	if err = os.WriteFile(certPath, kp.certPEM, 0o644); err != nil {
		return "", "", err
	}
	if err = os.WriteFile(keyPath, kp.keyPEM, 0o600); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

// serviceAccountKey writes the key pair that signs and verifies service account tokens
// (kube-apiserver --service-account-signing-key-file / --service-account-key-file,
// kube-controller-manager --service-account-private-key-file).
func serviceAccountKey(dir string) (privatePath, publicPath string, err error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return "", "", err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", err
	}
	privatePath = filepath.Join(dir, "sa.key")
	publicPath = filepath.Join(dir, "sa.pub")
	if err = os.WriteFile(privatePath, keyPEM, 0o600); err != nil {
		return "", "", err
	}
	if err = os.WriteFile(publicPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil {
		return "", "", err
	}
	return privatePath, publicPath, nil
}

// writeKubeconfig writes a kubeconfig with the certificates inline, as `kubeadm init`
// writes admin.conf, controller-manager.conf and scheduler.conf.
func writeKubeconfig(path, server string, ca *keyPair, user string, client *keyPair) error {
	b64 := func(data []byte) string { return base64Std(data) }
	text := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: gpuprov-test
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: %s@gpuprov-test
  context:
    cluster: gpuprov-test
    user: %s
current-context: %s@gpuprov-test
`, server, b64(ca.certPEM), user, b64(client.certPEM), b64(client.keyPEM), user, user, user)
	return os.WriteFile(path, []byte(text), 0o600)
}
